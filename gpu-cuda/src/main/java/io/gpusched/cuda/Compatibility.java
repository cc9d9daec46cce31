package io.gpusched.cuda;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * Whether an installation runs on a driver, with a sentence a user can act on.
 *
 * @param verdict          the verdict
 * @param message          what it means and what to do
 * @param requiredDriver   the driver that would run it natively, where known
 * @param forwardCompatDir the {@code compat/} directory to put first on {@code LD_LIBRARY_PATH}, for
 *                         {@link Verdict#NEEDS_FORWARD_COMPAT}
 */
public record Compatibility(Verdict verdict, String message, Optional<DriverVersion> requiredDriver,
        Optional<Path> forwardCompatDir) {

    /** Verdicts, best first. */
    public enum Verdict {
        /** The driver runs this toolkit natively. */
        COMPATIBLE,
        /** The driver is older but of the same major family: runs with CUDA minor version compatibility. */
        COMPATIBLE_MINOR_VERSION,
        /** Runs only with the installation's forward-compatibility libcuda (data-centre GPUs). */
        NEEDS_FORWARD_COMPAT,
        /** Does not run on this driver. */
        INCOMPATIBLE,
        /** The driver or the installation's version is not known. */
        UNKNOWN
    }

    /** Checks the components. */
    public Compatibility {
        Objects.requireNonNull(verdict, "verdict");
        Objects.requireNonNull(message, "message");
        Objects.requireNonNull(requiredDriver, "requiredDriver");
        Objects.requireNonNull(forwardCompatDir, "forwardCompatDir");
    }

    /** @return true for verdicts under which a job can run */
    public boolean runs() {
        return verdict == Verdict.COMPATIBLE || verdict == Verdict.COMPATIBLE_MINOR_VERSION
                || verdict == Verdict.NEEDS_FORWARD_COMPAT;
    }

    /**
     * Judges a toolkit against a driver.
     *
     * @param table        minimum drivers
     * @param toolkit      the installation's version
     * @param driver       the host driver
     * @param driverCuda   the CUDA version the driver reports, where known (NVML or nvidia-smi)
     * @param compatDir    the installation's forward-compatibility directory
     * @param dataCenter   whether the GPUs are data-centre parts (forward compatibility needs them)
     */
    public static Compatibility judge(CompatibilityTable table, CudaVersion toolkit, DriverVersion driver,
            Optional<CudaVersion> driverCuda, Optional<Path> compatDir, boolean dataCenter) {
        Optional<DriverVersion> min = table.minimumDriver(toolkit);
        Optional<CudaVersion> nativeCuda = driverCuda.or(() -> table.newestNativeToolkit(driver));
        String cuda = "CUDA " + toolkit.majorMinor();
        if (min.map(driver::atLeast).orElse(false) || nativeCuda.map(n -> n.atLeast(toolkit)).orElse(false)) {
            return new Compatibility(Verdict.COMPATIBLE, "driver " + driver + " runs " + cuda + " natively"
                    + min.map(m -> " (needs >= " + m + ")").orElse(""), min, Optional.empty());
        }
        String needs;
        Optional<CudaVersion> oldest = table.oldestToolkit();
        Optional<CudaVersion> newest = table.newestToolkit();
        if (min.isPresent()) {
            needs = "needs driver >= " + min.get();
        } else if (oldest.isPresent() && !toolkit.atLeast(oldest.get())) {
            // unknown-old: drivers run older toolkits, so only a driver older than the table's first row is in doubt
            return new Compatibility(Verdict.UNKNOWN, cuda + " is older than gpusched's driver table, which starts at"
                    + " CUDA " + oldest.get() + " (driver >= " + table.minimumDriver(oldest.get()).orElseThrow()
                    + "); driver " + driver + " is older than that too, so gpusched cannot tell whether it runs "
                    + cuda + ". Check NVIDIA's CUDA release notes, or upgrade the driver.", Optional.empty(),
                    Optional.empty());
        } else if (newest.isPresent() && toolkit.majorMinor().compareTo(newest.get()) > 0) {
            DriverVersion newestMin = table.minimumDriver(newest.get()).orElseThrow();
            needs = "is newer than gpusched's driver table, which ends at CUDA " + newest.get() + " (driver >= "
                    + newestMin + "), so needs a driver of at least that";
            if (driverCuda.isEmpty() && driver.atLeast(newestMin)) {
                Optional<DriverVersion> f = toolkit.major() >= 11 ? table.minorVersionFloor(toolkit.major())
                        : Optional.empty();
                if (f.isEmpty() || !driver.atLeast(f.get())) {
                    return new Compatibility(Verdict.UNKNOWN, cuda + " is newer than gpusched's driver table, which"
                            + " ends at CUDA " + newest.get() + "; driver " + driver + " is at least as new as that"
                            + " table's last row, so gpusched cannot tell whether it runs " + cuda + ". Give the"
                            + " driver's CUDA version (nvidia-smi's \"CUDA Version\") or extend the table.",
                            Optional.empty(), Optional.empty());
                }
            }
        } else {
            needs = "is not a release in gpusched's driver table (" + oldest.map(Object::toString).orElse("?") + " to "
                    + newest.map(Object::toString).orElse("?") + "), so its minimum driver is not known here";
        }
        Optional<DriverVersion> floor = toolkit.major() >= 11 ? table.minorVersionFloor(toolkit.major())
                : Optional.empty();
        if (floor.isPresent() && driver.atLeast(floor.get())) {
            return new Compatibility(Verdict.COMPATIBLE_MINOR_VERSION, cuda + " " + needs + " for full support;"
                    + " driver " + driver + " runs it with minor version compatibility (>= " + floor.get() + "):"
                    + " PTX newer than the driver cannot be JIT-compiled and APIs that need a newer driver fail with"
                    + " cudaErrorCallRequiresNewerDriver. Upgrade the driver for full support.", min, Optional.empty());
        }
        Optional<DriverVersion> forwardFloor = table.forwardCompatFloor(toolkit.major());
        boolean forwardOk = forwardFloor.map(driver::atLeast).orElse(false);
        if (compatDir.isPresent() && dataCenter && forwardOk) {
            return new Compatibility(Verdict.NEEDS_FORWARD_COMPAT, cuda + " " + needs + "; driver " + driver
                    + " runs it through forward compatibility: " + compatDir.get() + " goes first on LD_LIBRARY_PATH"
                    + " (data-centre GPUs only)", min, compatDir);
        }
        // the minor-version floor is worth naming only where it is below the native minimum (for 13.0 they are equal)
        String why = compatDir.isEmpty() ? floor.filter(f -> min.isEmpty() || f.compareTo(min.get()) < 0)
                .map(f -> " (or >= " + f + " with minor version compatibility)").orElse("")
                : !dataCenter ? " (its compat/ libraries work only on data-centre GPUs)"
                : " (its compat/ libraries need driver >= " + forwardFloor.map(Object::toString).orElse("?")
                        + ", and gpusched claims forward compatibility for CUDA " + toolkit.major()
                        + " only from there)";
        return new Compatibility(Verdict.INCOMPATIBLE, cuda + " " + needs + why + "; the node's driver is " + driver
                + ". Upgrade the driver or use an older CUDA.", min, Optional.empty());
    }
}
