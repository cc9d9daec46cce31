package io.gpusched.cli.everymember;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.GpuNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.stream.Collectors;

/**
 * A process embedding the library on its defaults: {@code GpuNode.builder().inventory("simulated:dgx1-v100")}, no
 * state directory given. Reads {@code ALLOC <n>}, {@code RELEASE <id>} and {@code EXIT} from standard input and
 * answers each with {@code MEMBER GRANTED <id> <indices>}, {@code MEMBER REFUSED <reason>} or
 * {@code MEMBER RELEASED <id> <true|false>}. Its allocations are bound to this process.
 */
public final class LibraryMember {
    private LibraryMember() {
    }

    /** @param args none */
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").auditLogging(false).build()) {
            System.out.println("MEMBER READY " + node.stateDirectory().orElseThrow());
            System.out.flush();
            for (String line = in.readLine(); line != null && !line.equals("EXIT"); line = in.readLine()) {
                String[] w = line.trim().split(" ");
                if (w[0].equals("ALLOC")) {
                    try {
                        Allocation a = node.scheduler().allocate(GpuRequest.builder().count(Integer.parseInt(w[1]))
                                .holder(HolderProcess.current()).owner("library").build());
                        System.out.println("MEMBER GRANTED " + a.id() + " " + a.deviceIndices().stream()
                                .map(String::valueOf).collect(Collectors.joining(",")));
                    } catch (GpuAllocationException e) {
                        System.out.println("MEMBER REFUSED " + e.reason() + ": " + e.getMessage());
                    }
                } else if (w[0].equals("RELEASE")) {
                    System.out.println("MEMBER RELEASED " + w[1] + " " + node.scheduler().release(w[1]));
                } else {
                    System.out.println("MEMBER ERROR unknown command " + line);
                }
                System.out.flush();
            }
        }
    }
}
