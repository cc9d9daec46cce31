package io.gpusched.cli.adversarial.output;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A stand-in inventory provider (test scope, found by ServiceLoader) whose devices report hostile text, as a backend
 * or a node description might. With {@link #PROPERTY} {@code raw}: {@link #RAW_UUIDS} and {@link #RAW_NAMES}, a UUID
 * holding a newline and a line for a shell to run, UUIDs and names with terminal escapes (clear screen, set title,
 * bell), a right-to-left override, and a UUID with shell quotes: the scheduler refuses such a backend (issue 36: device
 * identifiers are checked where they enter, whatever the backend). With {@code on}: the most hostile text the scheduler
 * accepts ({@link #UUIDS} plain tokens, {@link #NAMES} printable text with shell quotes, command substitutions and
 * backslashes), and a backend name with a terminal escape. Off otherwise, so no other test of this module sees it;
 * chosen with {@code gpu.backends: [hostile-standin]}.
 */
public final class HostileStandIn implements GpuInventoryProvider {
    /** The system property that turns the provider on. */
    public static final String PROPERTY = "gpusched.test.hostile-standin";
    /** The provider's name. */
    public static final String NAME = "hostile-standin";
    /** What a shell would run if device 0's UUID reached it unquoted and unescaped. */
    public static final String INJECTED = "LD_PRELOAD=/tmp/gpusched-evil.so";
    /** Device UUIDs a backend must not report (refused by the scheduler), by index. */
    public static final List<String> RAW_UUIDS = List.of("GPU-0000\n" + INJECTED, "GPU-1111\u001b[2J",
            "GPU-2222'; touch gpusched-pwned; echo '", "GPU-3333");
    /** Device names a backend must not report (refused by the scheduler), by index. */
    public static final List<String> RAW_NAMES = List.of("Tesla\u001b]0;pwned\u0007 V100", "A10\u202eevil\r",
            "H100\u009b31m", "V100");
    /** Device UUIDs, by index, in {@code on} mode. */
    public static final List<String> UUIDS = List.of("GPU-0000-a.b_c", "GPU-1111:2", "GPU-2222", "GPU-3333");
    /** Device names, by index, in {@code on} mode: printable, and hostile to a shell. */
    public static final List<String> NAMES = List.of("Tesla `pwned` \"V100\"", "A10 $(touch gpusched-pwned) 'evil'",
            "H100 \\ back\\slash; " + INJECTED, "V100");

    /** A public no-argument constructor, for ServiceLoader. */
    public HostileStandIn() {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return 1;
    }

    @Override
    public Optional<String> unavailabilityCause() {
        return List.of("on", "raw").contains(System.getProperty(PROPERTY)) ? Optional.empty()
                : Optional.of("a test's stand-in (off unless -D" + PROPERTY + "=on or raw)");
    }

    @Override
    public GpuInventory open(GpuConfig config) {
        GpuInventory base = GpuInventories.simulated("pcie-4xa10");
        List<GpuDevice> devices = new ArrayList<>();
        boolean raw = "raw".equals(System.getProperty(PROPERTY));
        for (GpuDevice d : base.devices()) {
            devices.add(new GpuDevice(d.index(), (raw ? RAW_UUIDS : UUIDS).get(d.index()), d.vendor(),
                    (raw ? RAW_NAMES : NAMES).get(d.index()), d.memory(),
                    d.computeCapability(), d.architecture(), d.pciBusId(), d.numaNode(), d.minor(),
                    d.driverVersion(), d.parentUuid(), d.properties(), d.memoryKnown()));
        }
        return new Inventory(base, List.copyOf(devices));
    }

    private record Inventory(GpuInventory base, List<GpuDevice> devices) implements GpuInventory {
        @Override
        public String backend() {
            return NAME + "\u001b[31m";
        }

        @Override
        public GpuTopology topology() {
            return GpuTopology.unconnected(devices);
        }

        @Override
        public GpuSample sample() {
            return base.sample();
        }

        @Override
        public void close() {
            base.close();
        }
    }
}
