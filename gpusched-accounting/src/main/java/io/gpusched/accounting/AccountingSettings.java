package io.gpusched.accounting;

import io.gpusched.core.GpuConfigException;
import io.gpusched.core.host.HpcJobMapping;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.StrictYaml;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * {@code gpu.accounting.*} and {@code gpu.idle.*} of a gpusched.yaml (gpu-core's {@code GpuConfig} accepts the keys and
 * leaves them to this class).
 * <pre>
 * gpu:
 *   accounting:
 *     enabled: true         # false: nothing is sampled into the store
 *     checkpoint: 60s       # open allocations' usage written this often: the most a crash of the sampler loses
 *     compact_after: 2d     # days older than this are compacted (one record per allocation per day, a summary)
 *     retention: 400d       # days older than this are deleted
 *     hpc_job_mapping_dir: /run/gpusched/hpc-jobs  # dcgm-exporter's --hpc-job-mapping-dir, written (default: none)
 *     attribution: [slurm, kubernetes]  # also meter GPUs Slurm jobs or pods use without an allocation (default: [])
 *   idle: {...}             # see IdlePolicy
 * </pre>
 *
 * @param enabled      whether the node's sampler writes the store
 * @param checkpoint   how often open intervals are written, 1 s to 1 h
 * @param compactAfter age (whole days, at least 1) after which a day is compacted
 * @param retention    age (whole days, more than {@code compactAfter}) after which a day is deleted
 * @param idle         the idle policy
 * @param hpcJobMappingDir where the sampler writes dcgm-exporter's HPC job-mapping files for the node's allocations
 *                     ({@link HpcJobMapping}), if anywhere
 * @param attribution  the sources beyond gpusched's allocations whose jobs are metered too, in order: {@code slurm}
 *                     (gpu-slurm's {@code SlurmJobAttribution}), {@code kubernetes} (gpu-kubernetes'
 *                     {@code PodResourcesAttribution}); the host that opens the sampler builds the chain
 */
public record AccountingSettings(boolean enabled, Duration checkpoint, Duration compactAfter, Duration retention,
        IdlePolicy idle, Optional<Path> hpcJobMappingDir, List<String> attribution) {

    /** The values {@code gpu.accounting.attribution} takes. */
    public static final List<String> ATTRIBUTION_SOURCES = List.of("slurm", "kubernetes");

    private static final Set<String> ACCOUNTING_KEYS = Set.of("enabled", "checkpoint", "compact_after", "retention",
            "hpc_job_mapping_dir", "attribution");
    private static final Set<String> IDLE_KEYS = Set.of("threshold", "window", "warn_after", "act_after", "action",
            "signal", "grace", "exempt_owners", "dry_run", "hook");

    /** Settings without a job-mapping directory. */
    public AccountingSettings(boolean enabled, Duration checkpoint, Duration compactAfter, Duration retention,
            IdlePolicy idle) {
        this(enabled, checkpoint, compactAfter, retention, idle, Optional.empty());
    }

    /** Settings metering gpusched's allocations only. */
    public AccountingSettings(boolean enabled, Duration checkpoint, Duration compactAfter, Duration retention,
            IdlePolicy idle, Optional<Path> hpcJobMappingDir) {
        this(enabled, checkpoint, compactAfter, retention, idle, hpcJobMappingDir, List.of());
    }

    /** @throws IllegalArgumentException naming the setting */
    public AccountingSettings {
        Objects.requireNonNull(hpcJobMappingDir, "hpcJobMappingDir");
        attribution = List.copyOf(attribution);
        for (String src : attribution) {
            if (!ATTRIBUTION_SOURCES.contains(src)) {
                throw new IllegalArgumentException("gpu.accounting.attribution lists \"" + src + "\"; valid: "
                        + String.join(", ", ATTRIBUTION_SOURCES));
            }
        }
        if (new HashSet<>(attribution).size() != attribution.size()) {
            throw new IllegalArgumentException("gpu.accounting.attribution lists a source twice: " + attribution);
        }
        if (hpcJobMappingDir.isPresent() && !hpcJobMappingDir.get().isAbsolute()) {
            throw new IllegalArgumentException("gpu.accounting.hpc_job_mapping_dir must be an absolute path, was "
                    + hpcJobMappingDir.get());
        }
        Objects.requireNonNull(checkpoint, "checkpoint");
        Objects.requireNonNull(compactAfter, "compactAfter");
        Objects.requireNonNull(retention, "retention");
        Objects.requireNonNull(idle, "idle");
        if (checkpoint.compareTo(Duration.ofSeconds(1)) < 0 || checkpoint.compareTo(Duration.ofHours(1)) > 0) {
            throw new IllegalArgumentException("gpu.accounting.checkpoint must be 1s to 1h, was " + checkpoint);
        }
        if (compactAfter.compareTo(Duration.ofDays(1)) < 0 || compactAfter.toSeconds() % 86_400 != 0) {
            throw new IllegalArgumentException("gpu.accounting.compact_after must be whole days, at least 1d, was "
                    + compactAfter);
        }
        if (retention.compareTo(compactAfter) <= 0 || retention.toSeconds() % 86_400 != 0) {
            throw new IllegalArgumentException("gpu.accounting.retention must be whole days, more than compact_after ("
                    + compactAfter.toDays() + "d), was " + retention);
        }
    }

    /** @return the defaults: enabled, 60 s checkpoints, compacted after 2 days, kept 400 days, the default policy */
    public static AccountingSettings defaults() {
        return new AccountingSettings(true, Duration.ofSeconds(60), Duration.ofDays(2), Duration.ofDays(400),
                IdlePolicy.defaults());
    }

    /** @return these settings with another idle policy */
    public AccountingSettings withIdle(IdlePolicy p) {
        return new AccountingSettings(enabled, checkpoint, compactAfter, retention, p, hpcJobMappingDir, attribution);
    }

    /** @return these settings writing dcgm-exporter's job-mapping files into {@code dir} */
    public AccountingSettings withHpcJobMappingDir(Path dir) {
        return new AccountingSettings(enabled, checkpoint, compactAfter, retention, idle, Optional.of(dir),
                attribution);
    }

    /** @return these settings metering the jobs of these sources too ({@link #ATTRIBUTION_SOURCES}) */
    public AccountingSettings withAttribution(List<String> sources) {
        return new AccountingSettings(enabled, checkpoint, compactAfter, retention, idle, hpcJobMappingDir, sources);
    }

    /** @return these settings with another checkpoint interval */
    public AccountingSettings withCheckpoint(Duration d) {
        return new AccountingSettings(enabled, d, compactAfter, retention, idle, hpcJobMappingDir, attribution);
    }

    /**
     * @param file a gpusched.yaml
     * @throws GpuConfigException naming the file and the setting
     */
    public static AccountingSettings load(Path file) {
        return parse(StrictYaml.read(file, "configuration"), file.toString());
    }

    /**
     * @param yaml   a gpusched.yaml's text (other keys are left to {@code GpuConfig})
     * @param source its name, for errors
     * @throws GpuConfigException naming the source and the setting's path
     */
    public static AccountingSettings parse(String yaml, String source) {
        StrictYaml gpu = StrictYaml.parse(yaml, source).child("gpu");
        AccountingSettings d = defaults();
        StrictYaml a = gpu.child("accounting").onlyKeys(ACCOUNTING_KEYS);
        StrictYaml i = gpu.child("idle").onlyKeys(IDLE_KEYS);
        IdlePolicy p = d.idle();
        try {
            double threshold = i.parsed("threshold", AccountingSettings::percent, p.threshold());
            IdlePolicy policy = new IdlePolicy(threshold,
                    i.parsed("window", Durations::parse, p.window()),
                    i.parsed("warn_after", Durations::parse, p.warnAfter()),
                    i.parsed("act_after", Durations::parse, p.actAfter()),
                    i.parsed("action", IdlePolicy.Action::parse, p.action()),
                    i.string("signal", p.signal()),
                    i.parsed("grace", Durations::parse, p.grace()),
                    i.strings("exempt_owners"),
                    i.bool("dry_run", p.dryRun()),
                    i.strings("hook"));
            return new AccountingSettings(a.bool("enabled", d.enabled()),
                    a.parsed("checkpoint", Durations::parse, d.checkpoint()),
                    a.parsed("compact_after", Durations::parse, d.compactAfter()),
                    a.parsed("retention", Durations::parse, d.retention()), policy,
                    Optional.ofNullable(a.parsed("hpc_job_mapping_dir", Path::of, null)), a.strings("attribution"));
        } catch (GpuConfigException e) {
            throw e;
        } catch (IllegalArgumentException e) {
            throw new GpuConfigException(source + ": " + e.getMessage(), e);
        }
    }

    private static double percent(String s) {
        if (!s.matches("[0-9]{1,3}(\\.[0-9]{1,3})?")) {
            throw new IllegalArgumentException("\"" + s + "\" is not a percentage such as 1 or 0.5");
        }
        return Double.parseDouble(s);
    }
}
