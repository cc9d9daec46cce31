package io.gpusched.core;

import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Printable;
import io.gpusched.core.internal.StrictYaml;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * gpusched's configuration, validated once when built or loaded and immutable after. YAML form:
 * <pre>
 * gpu:
 *   enabled: true              # false: every allocate fails with DISABLED
 *   strategy: packing          # packing | spreading
 *   backends: [nvml, procfs]   # providers to try, in order; empty: every provider by priority
 *   cuda_paths: [/opt/cuda]    # extra CUDA installations to consider
 *   max_gpus_per_request: 0    # 0: no limit
 *   allow_sharing: true        # false: SHARED requests are refused
 *   max_shared_per_gpu: 48     # most shared allocations one GPU takes (1 to 4096)
 *   leases: {release_on_expiry: false}              # true: an expired lease ends its allocation (any process)
 *   drain: {timeout: 5m}                           # released GPUs with processes left past this are quarantined
 *   rate_limit: {per_owner_per_second: 0, burst: 0} # 0: no limit; over it: RATE_LIMITED
 *   thermal: {max_sample_age: 30s}                 # older samples are ignored by the thermal strategy
 *   placement: {work_budget: 1000000}              # topology search budget (units, >= 1000) or exact
 *   state_dir: /var/lib/gpusched                   # node ledger shared by the node's processes; unset: in memory
 *   accounting: {...}                              # read by gpusched-accounting (AccountingSettings), not here
 *   idle: {...}                                    # read by gpusched-accounting (IdlePolicy), not here
 *   users: {max_gpus: 4, per_user: {alice: 8}, per_group: {students: 2}}  # GPUs one user may hold; 0: no limit
 *   service:                                       # the node service (gpusched serve; docs/SERVICE.md)
 *     socket: /run/gpusched/gpusched.sock
 *     socket_group: ""                             # empty: any local user may connect
 *     admin_group: gpuadmin                        # may act on anyone's allocations and jobs, drain and undrain
 *     login_cgroups: [/sys/fs/cgroup/user.slice]   # processes there open no GPU node; empty: off
 *     job_cgroup_parent: ""                        # empty: gpusched.jobs at the cgroup root
 *     kill_grace: 10s                              # TERM, then KILL after this
 *     job_group: ""                                # a group only jobs get (with NVreg_DeviceFileMode=0660)
 *     private_dir: ""                              # root's own files; required with state_group (docs/SERVICE.md)
 *   state_group: gpusched-engines                  # the group sharing it (unset: $GPUSCHED_STATE_GROUP, else none)
 * </pre>
 * Unknown keys are rejected with their path named.
 *
 * @param enabled           whether the scheduler hands out GPUs at all
 * @param strategy          name of the allocation strategy
 * @param backends          inventory providers to try, in order; empty means all by priority
 * @param cudaPaths         extra CUDA installation roots
 * @param maxGpusPerRequest largest GPU count one request may ask for; 0 means no limit
 * @param allowSharing      whether SHARED requests are accepted
 * @param releaseOnExpiry   whether the leases of the allocations this scheduler makes end them: the ledger records it
 *                          with each, and whichever process of the node changes or reads the ledger after the lease's
 *                          end releases it (ending its job cgroup first), with no maintenance thread; this scheduler
 *                          also ends expired leases made without it. Without it an expired lease stays held, marked
 *                          expired in every status, until released or renewed
 * @param drainTimeout      how long a released GPU may keep processes before it is quarantined
 * @param rateLimitPerSecond allocations per second per owner; 0 means no limit
 * @param rateLimitBurst    bucket size of the per-owner limit
 * @param sampleMaxAge      metrics older than this are ignored by the thermal strategy
 * @param stateDir          {@code gpu.state_dir}: the node ledger's directory (see {@link
 * GpuScheduler.Builder#stateDir}); empty: the
 *                          scheduler keeps its state in memory only
 * @param workBudget        {@code gpu.placement.work_budget}: work units one topology search may spend (at least
 *                          1,000; {@link io.gpusched.core.strategy.TopologyAwareStrategy#EXACT} for none, written
 *                          {@code exact})
 * @param maxSharedPerGpu   {@code gpu.max_shared_per_gpu}: most shared allocations one GPU takes at once, 1 to
 *                          {@value #MAX_SHARED_PER_GPU_LIMIT} (default {@value #DEFAULT_MAX_SHARED_PER_GPU}, MPS's own
 *                          limit of client contexts per GPU); a shared request that would go past it on a GPU is
 *                          refused for that GPU ({@code INSUFFICIENT_GPUS}, or {@code DEVICE_BUSY} for a GPU named)
 * @param users             {@code gpu.users}: per-user GPU limits, enforced in the ledger's transaction
 * @param service           {@code gpu.service}: the node service's settings
 * @param stateGroup        {@code gpu.state_group}: the group that may share the state directory with its owner (a
 *                          directory it owns, setgid, may be written by the group: engines running as service users of
 *                          their own beside the root service); empty: {@code $GPUSCHED_STATE_GROUP}, else none
 */
public record GpuConfig(
        boolean enabled,
        String strategy,
        List<String> backends,
        List<Path> cudaPaths,
        int maxGpusPerRequest,
        boolean allowSharing,
        boolean releaseOnExpiry,
        Duration drainTimeout,
        double rateLimitPerSecond,
        int rateLimitBurst,
        Duration sampleMaxAge,
        Optional<Path> stateDir,
        long workBudget,
        int maxSharedPerGpu,
        UserQuotas users,
        ServiceSettings service,
        Optional<String> stateGroup) {

    /** The default of {@code gpu.max_shared_per_gpu}: MPS serves at most 48 client contexts per GPU. */
    public static final int DEFAULT_MAX_SHARED_PER_GPU = 48;
    /** The largest {@code gpu.max_shared_per_gpu} accepted. */
    public static final int MAX_SHARED_PER_GPU_LIMIT = 4096;

    private static final Set<String> ROOT_KEYS = Set.of("gpu");
    private static final Set<String> GPU_KEYS = Set.of("enabled", "strategy", "backends", "cuda_paths",
            "max_gpus_per_request", "allow_sharing", "max_shared_per_gpu", "leases", "drain", "rate_limit", "thermal",
            "state_dir", "placement", "accounting", "idle", "users", "service",
            "state_group");

    /** @throws GpuConfigException naming the invalid setting */
    public GpuConfig {
        Objects.requireNonNull(strategy, "strategy");
        if (!AllocationStrategies.names().contains(strategy)) {
            throw new GpuConfigException("gpu.strategy: unknown strategy \"" + strategy + "\"; valid strategies are "
                    + AllocationStrategies.names());
        }
        backends = List.copyOf(backends);
        for (String b : backends) {
            if (b.isBlank()) {
                throw new GpuConfigException("gpu.backends: backend names must not be blank");
            }
        }
        cudaPaths = List.copyOf(cudaPaths);
        Objects.requireNonNull(drainTimeout, "drainTimeout");
        Objects.requireNonNull(stateDir, "stateDir");
        Objects.requireNonNull(sampleMaxAge, "sampleMaxAge");
        Objects.requireNonNull(stateGroup, "stateGroup");
        if (stateGroup.isPresent() && !stateGroup.get().matches("[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")) {
            throw new GpuConfigException("gpu.state_group: \"" + stateGroup.get().replace("\0", "\\0") + "\" is not a"
                    + " group name; expected a name such as gpusched-engines (letters, digits, '_', '.', '-'; at most"
                    + " 32) or a number");
        }
        if (drainTimeout.isNegative() || sampleMaxAge.isNegative() || sampleMaxAge.isZero()) {
            throw new GpuConfigException("gpu.drain.timeout must be >= 0 and gpu.thermal.max_sample_age > 0; got "
                    + drainTimeout + ", " + sampleMaxAge);
        }
        if (rateLimitPerSecond < 0 || rateLimitBurst < 0 || (rateLimitPerSecond > 0 && rateLimitBurst < 1)) {
            throw new GpuConfigException("gpu.rate_limit: per_owner_per_second must be >= 0 and, when set, burst"
                    + " >= 1; got " + rateLimitPerSecond + " and " + rateLimitBurst);
        }
        if (workBudget < TopologyAwareStrategy.MIN_WORK_BUDGET) {
            throw new GpuConfigException("gpu.placement.work_budget: " + workBudget + " is too small; valid: "
                    + TopologyAwareStrategy.WORK_BUDGET_VALUES);
        }
        if (maxSharedPerGpu < 1 || maxSharedPerGpu > MAX_SHARED_PER_GPU_LIMIT) {
            throw new GpuConfigException("gpu.max_shared_per_gpu: must be 1 to " + MAX_SHARED_PER_GPU_LIMIT
                    + " (shared allocations one GPU takes at once; default " + DEFAULT_MAX_SHARED_PER_GPU + "), was "
                    + maxSharedPerGpu);
        }
        Objects.requireNonNull(users, "users");
        Objects.requireNonNull(service, "service");
        if (maxGpusPerRequest < 0) {
            throw new GpuConfigException("gpu.max_gpus_per_request: must be >= 0 (0 = no limit), was "
                    + maxGpusPerRequest);
        }
    }

    /** @return the defaults: enabled, packing, all backends, no extra CUDA paths, no size limit, sharing allowed */
    public static GpuConfig defaults() {
        return builder().build();
    }

    /**
     * Loads a YAML file.
     *
     * @throws GpuConfigException if the file cannot be read, is larger than 3 MiB or a setting is invalid (the
     *                            message names its path)
     */
    public static GpuConfig load(Path file) {
        return parse(StrictYaml.read(file, "configuration"), file.toString());
    }

    /**
     * Parses YAML text.
     *
     * @param yaml   the document
     * @param source a name for error messages (file name)
     * @throws GpuConfigException if the text is not YAML, uses a tag other than plain scalars, lists and mappings,
     *                            or a setting is invalid; the message starts with {@code source}, names the key path
     *                            and what would be valid. No other exception is thrown for any text.
     */
    public static GpuConfig parse(String yaml, String source) {
        StrictYaml root = StrictYaml.parse(yaml, source).onlyKeys(ROOT_KEYS);
        StrictYaml gpu = root.child("gpu").onlyKeys(GPU_KEYS);
        Builder b = builder()
                .enabled(gpu.bool("enabled", true))
                .strategy(gpu.string("strategy", "packing"))
                .backends(gpu.texts("backends", "a provider name such as nvml"))
                .maxGpusPerRequest(gpu.integer("max_gpus_per_request", 0, 0, Integer.MAX_VALUE))
                .allowSharing(gpu.bool("allow_sharing", true))
                .maxSharedPerGpu(gpu.integer("max_shared_per_gpu", DEFAULT_MAX_SHARED_PER_GPU, 1,
                        MAX_SHARED_PER_GPU_LIMIT));
        StrictYaml leases = gpu.child("leases").onlyKeys(Set.of("release_on_expiry"));
        b.releaseOnExpiry(leases.bool("release_on_expiry", false));
        StrictYaml drain = gpu.child("drain").onlyKeys(Set.of("timeout"));
        b.drainTimeout(drain.parsed("timeout", Durations::parse, b.drainTimeout));
        StrictYaml rate = gpu.child("rate_limit").onlyKeys(Set.of("per_owner_per_second", "burst"));
        b.rateLimit(rate.parsed("per_owner_per_second", GpuConfig::nonNegativeNumber, 0.0),
                rate.integer("burst", 0, 0, Integer.MAX_VALUE));
        StrictYaml thermal = gpu.child("thermal").onlyKeys(Set.of("max_sample_age"));
        b.sampleMaxAge(thermal.parsed("max_sample_age", Durations::parse, b.sampleMaxAge));
        StrictYaml placement = gpu.child("placement").onlyKeys(Set.of("work_budget"));
        b.workBudget(placement.parsed("work_budget", TopologyAwareStrategy::parseWorkBudget, b.workBudget,
                TopologyAwareStrategy.WORK_BUDGET_VALUES));
        List<Path> paths = new ArrayList<>();
        List<String> given = gpu.texts("cuda_paths", "a directory such as /opt/cuda");
        for (int i = 0; i < given.size(); i++) {
            String p = given.get(i);
            try {
                if (p.isBlank()) {
                    throw new InvalidPathException(p, "blank");
                }
                paths.add(Path.of(p));
            } catch (InvalidPathException e) {
                throw gpu.error(gpu.pathOf("cuda_paths") + "[" + i + "]", "\"" + p.replace("\0", "\\0")
                        + "\" is not a usable path (" + e.getReason() + "); expected a directory such as /opt/cuda");
            }
        }
        b.cudaPaths(paths);
        b.users(users(gpu.child("users").onlyKeys(Set.of("max_gpus", "per_user", "per_group"))));
        b.service(service(gpu.child("service").onlyKeys(Set.of("socket", "socket_group", "admin_group",
                "login_cgroups", "job_cgroup_parent", "kill_grace", "job_group", "private_dir"))));
        String stateDir = gpu.string("state_dir", null);
        if (stateDir != null) {
            Path dir = null;
            try {
                dir = Path.of(stateDir);
            } catch (InvalidPathException e) {
                // reported below
            }
            if (dir == null || !dir.isAbsolute()) {
                throw gpu.error(gpu.pathOf("state_dir"), "\"" + stateDir.replace("\0", "\\0") + "\" is not an"
                        + " absolute path; expected a directory such as /var/lib/gpusched");
            }
            b.stateDir(dir);
        }
        b.stateGroup(gpu.string("state_group", null));
        try {
            return b.build();
        } catch (GpuConfigException e) {
            throw new GpuConfigException(source + ": " + e.getMessage(), e);
        }
    }

    private static UserQuotas users(StrictYaml u) {
        int max = u.integer("max_gpus", 0, 0, 1_000_000);
        Map<String, Integer> perUser = limits(u.child("per_user"));
        Map<String, Integer> perGroup = limits(u.child("per_group"));
        try {
            return new UserQuotas(max, perUser, perGroup);
        } catch (GpuConfigException e) {
            throw new GpuConfigException(u.source() + ": " + e.getMessage(), e);
        }
    }

    private static Map<String, Integer> limits(StrictYaml m) {
        Map<String, Integer> out = new LinkedHashMap<>();
        for (String name : m.keys()) {
            if (!UserQuotas.validName(name)) {
                throw m.error(m.pathOf(name.replaceAll("[^\\x20-\\x7e]", "?")), "is not a user or group name (1 to "
                        + UserQuotas.MAX_NAME + " printable characters, no whitespace, ':' or '/')");
            }
            out.put(name, m.requiredInteger(name, 0, 1_000_000));
        }
        return out;
    }

    private static ServiceSettings service(StrictYaml s) {
        ServiceSettings d = ServiceSettings.defaults();
        List<Path> login = new ArrayList<>();
        for (String p : s.strings("login_cgroups")) {
            login.add(cgroupPath(s, "login_cgroups", p));
        }
        Optional<Path> parent = optionalText(s, "job_cgroup_parent").map(p -> cgroupPath(s, "job_cgroup_parent", p));
        Path socket = absolutePath(s, "socket", d.socket());
        Optional<String> socketGroup = optionalText(s, "socket_group");
        Optional<String> adminGroup = optionalText(s, "admin_group");
        Duration grace = s.parsed("kill_grace", Durations::parse, d.killGrace());
        try {
            return new ServiceSettings(socket, socketGroup, adminGroup, login, parent, grace,
                    optionalText(s, "job_group"),
                    optionalText(s, "private_dir").map(p -> cgroupPath(s, "private_dir", p)));
        } catch (GpuConfigException e) {
            throw new GpuConfigException(s.source() + ": " + e.getMessage(), e);
        }
    }

    private static Optional<String> optionalText(StrictYaml s, String key) {
        String v = s.string(key, "");
        return v.isEmpty() ? Optional.empty() : Optional.of(v);
    }

    private static Path absolutePath(StrictYaml s, String key, Path fallback) {
        String v = s.string(key, null);
        if (v == null) {
            return fallback;
        }
        try {
            Path p = Path.of(v);
            if (p.isAbsolute()) {
                return p;
            }
        } catch (InvalidPathException e) {
            // reported below
        }
        throw s.error(s.pathOf(key), "\"" + v.replace("\0", "\\0") + "\" is not an absolute path; expected e.g. "
                + fallback);
    }

    /** @return {@code v} as a path, or a configuration error naming {@code key} (a cgroup or a directory) */
    private static Path cgroupPath(StrictYaml s, String key, String v) {
        try {
            return Path.of(v);
        } catch (InvalidPathException e) {
            throw s.error(s.pathOf(key), "\"" + v.replace("\0", "\\0") + "\" is not a usable path ("
                    + e.getReason() + ")");
        }
    }

    private static double nonNegativeNumber(String s) {
        // plain decimal only, as every configuration number: not 010 (YAML 1.1 octal), 0x1p4, 10d, 1e3 or " 10"
        // (a YAML float such as 0.0001 reaches here as Java writes it, 1.0E-4: that form is the YAML reader's, kept)
        if (!s.matches("(0|[1-9][0-9]{0,17})(\\.[0-9]{1,18})?") && !s.matches("[1-9]\\.[0-9]{1,17}E-?[0-9]{1,3}")) {
            throw new IllegalArgumentException("must be a plain decimal number >= 0 such as 2 or 0.5, was \""
                    + Printable.escape(s) + "\"");
        }
        try {
            double d = Double.parseDouble(s);
            if (d >= 0 && Double.isFinite(d)) {
                return d;
            }
        } catch (NumberFormatException e) {
            // fall through
        }
        throw new IllegalArgumentException("must be a number >= 0, was \"" + s + "\"");
    }

    /**
     * @return this configuration with another {@code gpu.strategy}
     * @throws GpuConfigException naming the valid strategies
     */
    public GpuConfig withStrategy(String name) {
        return new GpuConfig(enabled, name, backends, cudaPaths, maxGpusPerRequest, allowSharing, releaseOnExpiry,
                drainTimeout, rateLimitPerSecond, rateLimitBurst, sampleMaxAge, stateDir, workBudget, maxSharedPerGpu,
                users, service, stateGroup);
    }

    /**
     * @param names providers to try in order (as {@code gpu.backends})
     * @return this configuration with another {@code gpu.backends}
     */
    public GpuConfig withBackends(List<String> names) {
        return new GpuConfig(enabled, strategy, List.copyOf(names), cudaPaths, maxGpusPerRequest, allowSharing,
                releaseOnExpiry, drainTimeout, rateLimitPerSecond, rateLimitBurst, sampleMaxAge, stateDir, workBudget,
                maxSharedPerGpu, users, service,
                stateGroup);
    }

    /** @return this configuration with other user quotas ({@code gpu.users}) */
    public GpuConfig withUsers(UserQuotas v) {
        return new GpuConfig(enabled, strategy, backends, cudaPaths, maxGpusPerRequest, allowSharing, releaseOnExpiry,
                drainTimeout, rateLimitPerSecond, rateLimitBurst, sampleMaxAge, stateDir, workBudget, maxSharedPerGpu,
                v, service, stateGroup);
    }

    /** @return this configuration with other service settings ({@code gpu.service}) */
    public GpuConfig withService(ServiceSettings v) {
        return new GpuConfig(enabled, strategy, backends, cudaPaths, maxGpusPerRequest, allowSharing, releaseOnExpiry,
                drainTimeout, rateLimitPerSecond, rateLimitBurst, sampleMaxAge, stateDir, workBudget, maxSharedPerGpu,
                users, v, stateGroup);
    }

    /** @return a builder with the defaults */
    public static Builder builder() {
        return new Builder();
    }

    /** Builds a {@link GpuConfig}; {@link #build()} validates. */
    public static final class Builder {
        private boolean enabled = true;
        private String strategy = "packing";
        private List<String> backends = List.of();
        private List<Path> cudaPaths = List.of();
        private int maxGpusPerRequest;
        private boolean allowSharing = true;
        private boolean releaseOnExpiry;
        private Duration drainTimeout = Duration.ofMinutes(5);
        private double rateLimitPerSecond;
        private int rateLimitBurst;
        private Duration sampleMaxAge = Duration.ofSeconds(30);
        private Path stateDir;
        private long workBudget = TopologyAwareStrategy.DEFAULT_WORK_BUDGET;
        private int maxSharedPerGpu = DEFAULT_MAX_SHARED_PER_GPU;
        private UserQuotas users = UserQuotas.none();
        private ServiceSettings service = ServiceSettings.defaults();
        private String stateGroup;

        private Builder() {
        }

        /** @param v per-user GPU limits ({@code gpu.users}) @return this */
        public Builder users(UserQuotas v) {
            users = Objects.requireNonNull(v, "users");
            return this;
        }

        /** @param v the node service's settings ({@code gpu.service}) @return this */
        public Builder service(ServiceSettings v) {
            service = Objects.requireNonNull(v, "service");
            return this;
        }

        /** @return this */
        public Builder releaseOnExpiry(boolean v) { releaseOnExpiry = v; return this; }
        /** @return this */
        public Builder drainTimeout(Duration v) { drainTimeout = v; return this; }
        /** @param perSecond allocations per second per owner (0: none) @param burst bucket size @return this */
        public Builder rateLimit(double perSecond, int burst) {
            rateLimitPerSecond = perSecond;
            rateLimitBurst = burst;
            return this;
        }
        /** @return this */
        public Builder sampleMaxAge(Duration v) { sampleMaxAge = v; return this; }
        /**
         * @param v work units one topology search may spend ({@code gpu.placement.work_budget}), at least 1,000, or
         *          {@link TopologyAwareStrategy#EXACT} @return this
         */
        public Builder workBudget(long v) { workBudget = v; return this; }
        /** @param v the node ledger's directory ({@code gpu.state_dir}); null: none @return this */
        public Builder stateDir(Path v) {
            stateDir = v;
            return this;
        }

        /**
         * @param v the group that may share the state directory ({@code gpu.state_group}); null: {@code
         *          $GPUSCHED_STATE_GROUP}, else none @return this
         */
        public Builder stateGroup(String v) {
            stateGroup = v;
            return this;
        }

        /** @return this */
        public Builder enabled(boolean v) { enabled = v; return this; }
        /** @return this */
        public Builder strategy(String v) {
            strategy = Objects.requireNonNull(v, "strategy");
            return this;
        }
        /** @return this */
        public Builder backends(List<String> v) { backends = List.copyOf(v); return this; }
        /** @return this */
        public Builder cudaPaths(List<Path> v) { cudaPaths = List.copyOf(v); return this; }
        /** @return this */
        public Builder maxGpusPerRequest(int v) { maxGpusPerRequest = v; return this; }
        /** @return this */
        public Builder allowSharing(boolean v) { allowSharing = v; return this; }
        /** @param v most shared allocations one GPU takes ({@code gpu.max_shared_per_gpu}) @return this */
        public Builder maxSharedPerGpu(int v) {
            maxSharedPerGpu = v;
            return this;
        }

        /** @return the validated configuration */
        public GpuConfig build() {
            return new GpuConfig(enabled, strategy, backends, cudaPaths, maxGpusPerRequest, allowSharing,
                    releaseOnExpiry, drainTimeout, rateLimitPerSecond, rateLimitBurst, sampleMaxAge,
                    Optional.ofNullable(stateDir), workBudget, maxSharedPerGpu, users, service,
                    Optional.ofNullable(stateGroup).filter(g -> !g.isBlank()));
        }
    }
}
