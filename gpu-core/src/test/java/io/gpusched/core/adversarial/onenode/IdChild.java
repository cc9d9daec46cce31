package io.gpusched.core.adversarial.onenode;

import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A second process for {@link IssuedIdsAttackTest}: reads {@code release ID} / {@code renew ID} lines on stdin and
 * answers each with one line: {@code true}, {@code false}, {@code renewed}, the refusal's reason, or the exception.
 */
public final class IdChild {
    private IdChild() {
    }

    public static void main(String[] args) throws Exception {
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), Path.of(args[0]));
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null;) {
                int sp = line.indexOf(' ');
                String op = line.substring(0, sp);
                String id = line.substring(sp + 1);
                String answer;
                try {
                    answer = op.equals("release") ? Boolean.toString(s.release(id))
                            : "renewed " + s.renew(id, Duration.ofMinutes(5)).id();
                } catch (GpuAllocationException e) {
                    answer = e.reason().name();
                } catch (RuntimeException e) {
                    answer = e.toString().replace('\n', ' ');
                }
                System.out.println(answer);
                System.out.flush();
            }
        }
    }
}
