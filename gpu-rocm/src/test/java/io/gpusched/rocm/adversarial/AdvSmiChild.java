package io.gpusched.rocm.adversarial;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.rocm.RocmSmiInventoryProvider;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * Runs the ROCm SMI provider (real librocm_smi) in its own JVM inside a private mount namespace whose
 * {@code /sys/class/kfd/kfd/topology} is a test tree. Prints {@code cause: ...} lines and {@code done} at the end;
 * the parent judges the exit status and the output.
 */
public final class AdvSmiChild {

    private AdvSmiChild() {
    }

    public static void main(String[] args) throws Exception {
        RocmSmiInventoryProvider p = new RocmSmiInventoryProvider(Optional.empty(), Path.of("/sys"), Path.of("/dev"),
                true);
        switch (args[0]) {
            case "cause" -> System.out.println("cause: " + p.unavailabilityCause().orElse("<none>"));
            case "change" -> {
                // verdict on the tree as given, then a node loses io_links/ (librocm_smi 5.2.3 asserts on that)
                System.out.println("cause: " + p.unavailabilityCause().orElse("<none>"));
                Path links = Path.of(args[1]);
                try (Stream<Path> s = Files.walk(links)) {
                    for (Path f : s.sorted(Comparator.reverseOrder()).toList()) {
                        Files.delete(f);
                    }
                }
                try (GpuInventory inv = p.open(GpuConfig.defaults())) {
                    System.out.println("opened: " + inv.devices().size());
                } catch (BackendUnavailableException e) {
                    System.out.println("typed: " + e.getMessage());
                }
                System.out.println("cause: " + p.unavailabilityCause().orElse("<none>"));
            }
            case "concurrent" -> {
                Thread[] ts = new Thread[4];
                for (int i = 0; i < ts.length; i++) {
                    ts[i] = new Thread(() -> System.out.println("cause: " + p.unavailabilityCause().orElse("<none>")));
                    ts[i].start();
                }
                for (Thread t : ts) {
                    t.join();
                }
            }
            default -> throw new IllegalArgumentException(args[0]);
        }
        System.out.println("done");
    }
}
