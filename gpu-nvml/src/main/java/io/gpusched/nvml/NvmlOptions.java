package io.gpusched.nvml;

import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * Settings of the NVML backend.
 *
 * @param library        explicit path of {@code libnvidia-ml.so.1}; empty: {@code jna.library.path}, then the loader
 * @param sysfsRoot      root of sysfs, for NUMA nodes ({@code /sys})
 * @param ignoredXids    XIDs that are application errors, not device faults (13, 31, 43, 45, 68, 109)
 * @param watchHealth    whether to run the XID watcher thread
 * @param eventWait      how long one {@code nvmlEventSetWait_v2} blocks
 * @param recoveryAfter  quiet time after an XID before a device that answers again is healthy again
 * @param clock          clock for health timing
 */
public record NvmlOptions(Optional<Path> library, Path sysfsRoot, Set<Long> ignoredXids, boolean watchHealth,
        Duration eventWait, Duration recoveryAfter, Clock clock) {

    /** XIDs caused by applications (illegal address, MMU fault from user code, …): ignored by default. */
    public static final Set<Long> APPLICATION_XIDS = Set.of(13L, 31L, 43L, 45L, 68L, 109L);

    /** @throws IllegalArgumentException for a non-positive duration */
    public NvmlOptions {
        Objects.requireNonNull(library, "library");
        Objects.requireNonNull(sysfsRoot, "sysfsRoot");
        ignoredXids = Set.copyOf(ignoredXids);
        if (eventWait.isNegative() || eventWait.isZero() || recoveryAfter.isNegative()) {
            throw new IllegalArgumentException("eventWait must be positive and recoveryAfter >= 0; got " + eventWait
                    + ", " + recoveryAfter);
        }
        Objects.requireNonNull(clock, "clock");
    }

    /**
     * @return defaults, with {@code -Dgpusched.nvml.library=PATH} and {@code -Dgpusched.sysfs.root=DIR} honoured
     */
    public static NvmlOptions defaults() {
        String lib = System.getProperty("gpusched.nvml.library");
        return new NvmlOptions(lib == null || lib.isBlank() ? Optional.empty() : Optional.of(Path.of(lib)),
                Path.of(System.getProperty("gpusched.sysfs.root", "/sys")), APPLICATION_XIDS, true,
                Duration.ofMillis(500), Duration.ofMinutes(5), Clock.systemUTC());
    }

    /** @return a copy loading the library from this file */
    public NvmlOptions withLibrary(Path path) {
        return new NvmlOptions(Optional.of(path), sysfsRoot, ignoredXids, watchHealth, eventWait, recoveryAfter, clock);
    }

    /** @return a copy reading NUMA nodes under this sysfs root */
    public NvmlOptions withSysfsRoot(Path root) {
        return new NvmlOptions(library, root, ignoredXids, watchHealth, eventWait, recoveryAfter, clock);
    }

    /**
     * @return a copy with the health watcher on or off, waiting {@code wait} per call and recovering after {@code
     * after}
     */
    public NvmlOptions withHealthWatch(boolean on, Duration wait, Duration after) {
        return new NvmlOptions(library, sysfsRoot, ignoredXids, on, wait, after, clock);
    }

    /** @return a copy ignoring these XIDs */
    public NvmlOptions withIgnoredXids(Set<Long> xids) {
        return new NvmlOptions(library, sysfsRoot, xids, watchHealth, eventWait, recoveryAfter, clock);
    }

    /** @return a copy using this clock */
    public NvmlOptions withClock(Clock c) {
        return new NvmlOptions(library, sysfsRoot, ignoredXids, watchHealth, eventWait, recoveryAfter, c);
    }
}
