package io.gpusched.rocm;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Optional;

/**
 * The ROCm SMI provider: above the sysfs one when both work. Library from {@code -Dgpusched.rocm-smi.library}, else
 * any soname of {@code librocm_smi64}. Before {@code rsmi_init} runs in this process, the KFD tree is checked for the
 * shapes librocm_smi is known to abort on and the library is run once in a child JVM (cached per tree state): a library
 * that kills a process kills that one, and this provider reports why it is unavailable.
 */
public final class RocmSmiInventoryProvider implements GpuInventoryProvider {

    /** Priority: above the AMD sysfs provider (60). */
    public static final int PRIORITY = 90;

    private final Optional<Path> library;
    private final Path sysfsRoot;
    private final Path devRoot;
    private final boolean initWithoutDriver;
    private final RocmSmiInventory.Guard guard;

    /** From system properties. */
    public RocmSmiInventoryProvider() {
        this(Optional.ofNullable(System.getProperty("gpusched.rocm-smi.library")).map(Path::of),
                Path.of(System.getProperty("gpusched.sysfs.root", "/sys")), Path.of("/dev"), false);
    }

    /**
     * @param library           explicit library
     * @param sysfsRoot         root of sysfs
     * @param devRoot           root of device nodes
     * @param initWithoutDriver call rsmi_init even where nothing of amdgpu is present
     */
    public RocmSmiInventoryProvider(Optional<Path> library, Path sysfsRoot, Path devRoot, boolean initWithoutDriver) {
        this(library, sysfsRoot, devRoot, initWithoutDriver, RocmSmiInventory.Guard.DEFAULT);
    }

    RocmSmiInventoryProvider(Optional<Path> library, Path sysfsRoot, Path devRoot, boolean initWithoutDriver,
            RocmSmiInventory.Guard guard) {
        this.library = library;
        this.sysfsRoot = sysfsRoot;
        this.devRoot = devRoot;
        this.initWithoutDriver = initWithoutDriver;
        this.guard = guard;
    }

    @Override
    public String name() {
        return "rocm-smi";
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
        try (GpuInventory inv = open(null)) {
            return inv.devices().isEmpty() ? Optional.of("ROCm SMI reports no GPU") : Optional.empty();
        } catch (BackendUnavailableException e) {
            return Optional.of(e.getMessage());
        } catch (LinkageError e) {
            return Optional.of("JNA could not be loaded: " + String.valueOf(e.getMessage()).lines().findFirst()
                    .orElse(""));
        } catch (RuntimeException e) {
            return Optional.of("ROCm SMI failed: " + e);
        }
    }

    @Override
    public GpuInventory open(GpuConfig config) {
        return RocmSmiInventory.open(library, sysfsRoot, devRoot, Clock.systemUTC(), initWithoutDriver, guard);
    }
}
