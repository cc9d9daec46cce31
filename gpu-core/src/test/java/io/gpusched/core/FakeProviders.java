package io.gpusched.core;

import java.util.Optional;

/** Inventory providers registered for tests through META-INF/services; switched on and off by the tests. */
final class FakeProviders {
    static volatile String highCause = "library not found";
    static volatile String lowCause;
    static volatile boolean lowFailsToOpen;

    private FakeProviders() {
    }

    static void reset() {
        highCause = "library not found";
        lowCause = null;
        lowFailsToOpen = false;
    }

    /** A high-priority provider, like a native backend. */
    public static final class High implements GpuInventoryProvider {
        @Override
        public String name() { return "fake-high"; }
        @Override
        public int priority() { return 100; }
        @Override
        public Optional<String> unavailabilityCause() { return Optional.ofNullable(highCause); }
        @Override
        public GpuInventory open(GpuConfig config) { return GpuInventories.simulated("dgx-h100"); }
    }

    /** A low-priority provider, like a pure-Java fallback. */
    public static final class Low implements GpuInventoryProvider {
        @Override
        public String name() { return "fake-low"; }
        @Override
        public int priority() { return 10; }
        @Override
        public Optional<String> unavailabilityCause() { return Optional.ofNullable(lowCause); }
        @Override
        public GpuInventory open(GpuConfig config) {
            if (lowFailsToOpen) {
                throw new BackendUnavailableException("permission denied on /dev/nvidiactl");
            }
            return GpuInventories.simulated("pcie-4xa10");
        }
    }
}
