package io.gpusched.rocm;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Optional;

/** The pure-Java AMD provider over KFD/DRM sysfs; root from {@code -Dgpusched.sysfs.root} (default {@code /sys}). */
public final class KfdSysfsInventoryProvider implements GpuInventoryProvider {

    /** Priority: below ROCm SMI. */
    public static final int PRIORITY = 60;

    private final Path sysfsRoot;

    /** With the sysfs root from the system property. */
    public KfdSysfsInventoryProvider() {
        this(Path.of(System.getProperty("gpusched.sysfs.root", "/sys")));
    }

    /** @param sysfsRoot root of sysfs */
    public KfdSysfsInventoryProvider(Path sysfsRoot) {
        this.sysfsRoot = sysfsRoot;
    }

    @Override
    public String name() {
        return "amd-sysfs";
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public Optional<String> unavailabilityCause() {
        return cause().map(KfdTopology::oneLine);
    }

    private Optional<String> cause() {
        Optional<KfdTopology> t = KfdTopology.read(sysfsRoot);
        if (t.isEmpty()) {
            return Optional.of("no KFD topology at " + sysfsRoot.resolve("class/kfd/kfd/topology/nodes")
                    + " (amdgpu not loaded)");
        }
        if (t.get().gpuNodes().isEmpty()) {
            return Optional.of("the KFD topology lists no GPU node (simd_count > 0)"
                    + (t.get().problems().isEmpty() ? "" : "; " + t.get().problems().get(0)));
        }
        try {
            KfdSysfsInventory.from(t.get(), sysfsRoot, Clock.systemUTC());
        } catch (RuntimeException e) {
            return Optional.of(e.getMessage());
        }
        return Optional.empty();
    }

    @Override
    public GpuInventory open(GpuConfig config) {
        try {
            return KfdSysfsInventory.open(sysfsRoot, Clock.systemUTC());
        } catch (BackendUnavailableException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new BackendUnavailableException(KfdTopology.oneLine("reading the KFD topology failed: "
                    + e.getMessage()));
        }
    }
}
