package io.gpusched.core;

import io.gpusched.core.internal.Printable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a job asks for. Build one with {@link #builder()}, or parse the forms users already write with
 * {@link GpuRequests}. Immutable and validated: contradictions are rejected by {@link Builder#build()}.
 *
 * <p>Identifiers are bounded where they enter (the builder, {@link #withOwner}, {@link #withJobId} and every parser in
 * {@link GpuRequests}): printable text (no control, format or line-separator characters, which a terminal or a shell
 * would act on) of at most {@value #MAX_OWNER_LENGTH} characters for an owner (Linux user names, Kerberos principals
 * {@code user/host@REALM}, tenant names), {@value #MAX_JOB_ID_LENGTH} for a job id (a Kubernetes pod name is up to 253,
 * a YARN container id about 40), and at most {@value #MAX_LABELS} labels, keys of at most
 * {@value #MAX_LABEL_KEY_LENGTH} and values of at most {@value #MAX_LABEL_VALUE_LENGTH} characters (Kubernetes bounds
 * a label name at 63). The bounds keep what every reader of the node ledger (status, the console, each event) carries
 * per allocation small. The canonical constructor does not bound them: requests read back from a node ledger written
 * before the bounds keep what they hold.
 *
 * @param count                number of GPUs, at least 1
 * @param minMemory            minimum total memory of each GPU
 * @param minComputeCapability minimum NVIDIA compute capability
 * @param vendor               required vendor
 * @param modelPattern         glob matched against the device name, case-insensitive ({@code "*A100*"})
 * @param deviceIndices        explicit device indices (then {@code count} equals their number)
 * @param deviceUuids          explicit device UUIDs (then {@code count} equals their number)
 * @param sharing              exclusive (default) or shared
 * @param sharedMemory         memory reserved on each GPU when shared
 * @param owner                who asks (user, tenant), for audit and limits
 * @param jobId                the job this is for
 * @param labels               free-form labels carried to the allocation
 * @param hint                 training or inference, for thermal/utilization-aware strategies
 * @param preferredNuma        NUMA node to place on when it can hold the whole request
 * @param maxDuration          lease: the allocation expires this long after it is made (see {@link GpuScheduler#renew})
 * @param requiredDevices      device indices that must be part of the answer, which holds {@code count} devices in all
 *                             ("these, plus the best connected others"); empty: no constraint
 * @param holder               the process the allocation is bound to: it is reclaimed once that process is gone
 * @param ownerUid             the owner's Unix uid, where the kernel vouched for it (the node service sets it from the
 *                             caller's peer credentials; a request's own claim never does)
 * @param jobCgroup            the cgroup directory of the job using the allocation (an absolute path), so that a
 *                             reclaim can end the job's processes before its GPUs are handed out again
 * @param jobProcess           the job's own process (pid and start time), for a job run without a cgroup: while it
 *                             lives, {@link GpuScheduler#release} of the allocation is refused ({@code JOB_RUNNING})
 */
public record GpuRequest(
        int count,
        Optional<MemorySize> minMemory,
        Optional<ComputeCapability> minComputeCapability,
        Optional<GpuVendor> vendor,
        Optional<String> modelPattern,
        List<Integer> deviceIndices,
        List<String> deviceUuids,
        SharingMode sharing,
        Optional<MemorySize> sharedMemory,
        Optional<String> owner,
        Optional<String> jobId,
        Map<String, String> labels,
        Optional<WorkloadHint> hint,
        OptionalInt preferredNuma,
        Optional<Duration> maxDuration,
        List<Integer> requiredDevices,
        Optional<HolderProcess> holder,
        OptionalLong ownerUid,
        Optional<String> jobCgroup,
        Optional<HolderProcess> jobProcess) {

    /** Most characters (code points) of an owner. */
    public static final int MAX_OWNER_LENGTH = 128;
    /** Most characters (code points) of a job id. */
    public static final int MAX_JOB_ID_LENGTH = 256;
    /** Most labels on one request. */
    public static final int MAX_LABELS = 64;
    /** Most characters (code points) of a label key. */
    public static final int MAX_LABEL_KEY_LENGTH = 63;
    /** Most characters (code points) of a label value (which may be empty). */
    public static final int MAX_LABEL_VALUE_LENGTH = 256;

    /** The request without an owner uid or job cgroup (the form of gpusched 0.1). */
    public GpuRequest(int count, Optional<MemorySize> minMemory, Optional<ComputeCapability> minComputeCapability,
            Optional<GpuVendor> vendor, Optional<String> modelPattern, List<Integer> deviceIndices,
            List<String> deviceUuids, SharingMode sharing, Optional<MemorySize> sharedMemory, Optional<String> owner,
            Optional<String> jobId, Map<String, String> labels, Optional<WorkloadHint> hint, OptionalInt preferredNuma,
            Optional<Duration> maxDuration, List<Integer> requiredDevices, Optional<HolderProcess> holder) {
        this(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids, sharing,
                sharedMemory, owner, jobId, labels, hint, preferredNuma, maxDuration, requiredDevices, holder,
                OptionalLong.empty(), Optional.empty(), Optional.empty());
    }

    /** The request without a job process (the form before it was recorded). */
    public GpuRequest(int count, Optional<MemorySize> minMemory, Optional<ComputeCapability> minComputeCapability,
            Optional<GpuVendor> vendor, Optional<String> modelPattern, List<Integer> deviceIndices,
            List<String> deviceUuids, SharingMode sharing, Optional<MemorySize> sharedMemory, Optional<String> owner,
            Optional<String> jobId, Map<String, String> labels, Optional<WorkloadHint> hint, OptionalInt preferredNuma,
            Optional<Duration> maxDuration, List<Integer> requiredDevices, Optional<HolderProcess> holder,
            OptionalLong ownerUid, Optional<String> jobCgroup) {
        this(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids, sharing,
                sharedMemory, owner, jobId, labels, hint, preferredNuma, maxDuration, requiredDevices, holder,
                ownerUid, jobCgroup, Optional.empty());
    }

    /** @throws IllegalArgumentException on a contradiction (see {@link Builder#build()}) */
    public GpuRequest {
        Objects.requireNonNull(minMemory, "minMemory");
        Objects.requireNonNull(minComputeCapability, "minComputeCapability");
        Objects.requireNonNull(vendor, "vendor");
        Objects.requireNonNull(modelPattern, "modelPattern");
        Objects.requireNonNull(sharing, "sharing");
        Objects.requireNonNull(sharedMemory, "sharedMemory");
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(jobId, "jobId");
        deviceIndices = List.copyOf(deviceIndices);
        deviceUuids = List.copyOf(deviceUuids);
        labels = Map.copyOf(labels);
        Objects.requireNonNull(hint, "hint");
        Objects.requireNonNull(preferredNuma, "preferredNuma");
        Objects.requireNonNull(maxDuration, "maxDuration");
        requiredDevices = List.copyOf(requiredDevices);
        Objects.requireNonNull(holder, "holder");
        Objects.requireNonNull(ownerUid, "ownerUid");
        Objects.requireNonNull(jobCgroup, "jobCgroup");
        Objects.requireNonNull(jobProcess, "jobProcess");
        if (ownerUid.isPresent()) {
            checkUid(ownerUid.getAsLong());
        }
        jobCgroup.ifPresent(GpuRequest::checkCgroup);
        if (maxDuration.isPresent() && (maxDuration.get().isNegative() || maxDuration.get().isZero())) {
            throw new IllegalArgumentException("a lease must be positive, was " + maxDuration.get());
        }
        if (preferredNuma.isPresent() && preferredNuma.getAsInt() < 0) {
            throw new IllegalArgumentException("NUMA node must be >= 0, was " + preferredNuma.getAsInt());
        }
        if (count < 1) {
            throw new IllegalArgumentException("GPU count must be at least 1, was " + count);
        }
        if (!deviceIndices.isEmpty() && !deviceUuids.isEmpty()) {
            throw new IllegalArgumentException("give explicit device indices or UUIDs, not both (indices "
                    + deviceIndices + ", UUIDs " + deviceUuids + ")");
        }
        List<?> explicit = deviceIndices.isEmpty() ? deviceUuids : deviceIndices;
        if (!explicit.isEmpty() && explicit.size() != count) {
            throw new IllegalArgumentException("count " + count + " contradicts the " + explicit.size()
                    + " explicit devices " + explicit + "; leave count out or make it " + explicit.size());
        }
        if (new HashSet<>(explicit).size() != explicit.size()) {
            throw new IllegalArgumentException("explicit devices " + explicit + " name a device twice");
        }
        for (int i : deviceIndices) {
            if (i < 0) {
                throw new IllegalArgumentException("device index must be >= 0, was " + i);
            }
        }
        if (!requiredDevices.isEmpty()) {
            if (!explicit.isEmpty()) {
                throw new IllegalArgumentException("required devices " + requiredDevices + " go with a count of"
                        + " devices to add to them, not with explicit devices " + explicit);
            }
            if (requiredDevices.size() > count) {
                throw new IllegalArgumentException("count " + count + " is less than the " + requiredDevices.size()
                        + " required devices " + requiredDevices + "; make count at least " + requiredDevices.size());
            }
            if (new HashSet<>(requiredDevices).size() != requiredDevices.size()) {
                throw new IllegalArgumentException("required devices " + requiredDevices + " name a device twice");
            }
            for (int i : requiredDevices) {
                if (i < 0) {
                    throw new IllegalArgumentException("required device index must be >= 0, was " + i);
                }
            }
        }
        if (sharing == SharingMode.SHARED && sharedMemory.isEmpty()) {
            throw new IllegalArgumentException("a SHARED request needs a memory reservation per GPU"
                    + " (e.g. sharedMemory(MemorySize.parse(\"4GB\")))");
        }
        if (sharing == SharingMode.EXCLUSIVE && sharedMemory.isPresent()) {
            throw new IllegalArgumentException("a memory reservation (" + sharedMemory.get()
                    + ") only applies to SHARED requests; this one is EXCLUSIVE");
        }
        if (sharedMemory.isPresent() && sharedMemory.get().bytes() == 0) {
            throw new IllegalArgumentException("a shared memory reservation must be more than 0 bytes");
        }
        modelPattern.ifPresent(GpuRequest::checkGlob);
    }

    /**
     * Whether {@code held} belongs to the user this request is for, as quotas count it: the same uid where both have
     * one, else the same owner name (an engine that names its user without a uid, beside the node service's requests
     * that carry both).
     *
     * @param held another request (typically a live allocation's)
     * @return whether the two have the same owner
     */
    public boolean sameOwnerAs(GpuRequest held) {
        if (ownerUid.isPresent() && held.ownerUid().isPresent()) {
            return ownerUid.getAsLong() == held.ownerUid().getAsLong();
        }
        return held.owner().isPresent() && held.owner().equals(owner);
    }

    /**
     * @param d a device of the node
     * @return whether this request could ever be given {@code d}, whatever holds, drains or ails it now: the GPUs it
     *         names (if any), its vendor, model and compute capability, and its memory allow it
     */
    public boolean couldUse(GpuDevice d) {
        return matchesIdentityOf(d) && Placement.hasMemory(this, d);
    }

    /**
     * @param d a device of the node
     * @return whether {@code d} is among the GPUs this request names (if any) and has its vendor, model and compute
     *         capability (its memory is not asked)
     */
    public boolean matchesIdentityOf(GpuDevice d) {
        return (deviceIndices.isEmpty() || deviceIndices.contains(d.index()))
                && (deviceUuids.isEmpty() || deviceUuids.contains(d.uuid())) && Placement.matchesIdentity(this, d);
    }

    /** @return true if the device's name matches {@link #modelPattern()} (or no pattern is set) */
    public boolean matchesModel(String deviceName) {
        return modelPattern.isEmpty() || globMatches(compiled(modelPattern.get()), deviceName);
    }

    /**
     * Compiled model globs (case-folded code points): placement tests every device against the same few patterns.
     * Bounded in entries and in size: patterns come from users, so a long one (over {@value #CACHED_GLOB_CHARS} chars)
     * is folded per call rather than kept alive in this static map after its request is gone.
     */
    private static final ConcurrentHashMap<String, int[]> GLOBS = new ConcurrentHashMap<>();
    private static final int CACHED_GLOB_CHARS = 256;

    private static int[] compiled(String glob) {
        if (glob.length() > CACHED_GLOB_CHARS) {
            return folded(checkGlob(glob));
        }
        int[] p = GLOBS.get(glob);
        if (p == null) {
            p = folded(checkGlob(glob));
            if (GLOBS.size() >= 256) {
                GLOBS.clear();
            }
            GLOBS.put(glob, p);
        }
        return p;
    }

    private static String checkGlob(String glob) {
        if (glob.isBlank()) {
            throw new IllegalArgumentException("model pattern must not be blank; use e.g. \"*A100*\"");
        }
        return glob;
    }

    /** by code point (a surrogate pair is one character to match, as an emoji is one to a user), case-folded */
    private static int[] folded(String s) {
        return s.codePoints().map(GpuRequest::fold).toArray();
    }

    /** one case for both (as a case-insensitive, Unicode-aware regex compares: upper, then lower) */
    private static int fold(int c) {
        return Character.toLowerCase(Character.toUpperCase(c));
    }

    /**
     * Whether {@code name} matches the folded glob ({@code *}: any run of characters, {@code ?}: one character, every
     * other character itself, case-insensitive). Not a regular expression: a user's pattern is matched in at most
     * pattern x name steps (a run of stars that a backtracking regex takes exponential time over, for a pattern of a
     * few dozen stars, held the node's lock for minutes): on a mismatch, only the last star seen takes one more
     * character, as the classic greedy wildcard match does.
     */
    static boolean globMatches(int[] glob, String name) {
        int[] s = folded(name);
        int g = 0;
        int i = 0;
        int star = -1;
        int resume = 0;
        while (i < s.length) {
            if (g < glob.length && glob[g] == '*') {
                star = g++;
                resume = i;
            } else if (g < glob.length && (glob[g] == '?' || glob[g] == s[i])) {
                g++;
                i++;
            } else if (star >= 0) {
                g = star + 1;
                i = ++resume;
            } else {
                return false;
            }
        }
        while (g < glob.length && glob[g] == '*') {
            g++;
        }
        return g == glob.length;
    }

    /**
     * @return a copy of this request for the given job id
     * @throws IllegalArgumentException when the id is blank, not printable or too long (see the class comment)
     */
    public GpuRequest withJobId(String job) {
        return new GpuRequest(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids,
                sharing, sharedMemory, owner, Optional.of(Builder.jobText(job)), labels, hint, preferredNuma,
                maxDuration,
                requiredDevices, holder, ownerUid, jobCgroup, jobProcess);
    }

    /** @return a copy bound to this holder process (replacing any holder) */
    public GpuRequest withHolder(HolderProcess h) {
        Objects.requireNonNull(h, "holder");
        return new GpuRequest(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids,
                sharing, sharedMemory, owner, jobId, labels, hint, preferredNuma, maxDuration, requiredDevices,
                Optional.of(h), ownerUid, jobCgroup, jobProcess);
    }

    /**
     * @param name the owner's user name
     * @param uid  the owner's uid, as the kernel vouched for it
     * @return a copy owned by this user (replacing any owner the request named)
     */
    public GpuRequest withOwner(String name, long uid) {
        return new GpuRequest(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids,
                sharing, sharedMemory, Optional.of(Builder.ownerText(name)), jobId, labels, hint,
                preferredNuma, maxDuration, requiredDevices, holder, OptionalLong.of(checkUid(uid)), jobCgroup,
                jobProcess);
    }

    /** @return a copy that records the cgroup directory of the job using it (replacing any) */
    public GpuRequest withJobCgroup(String cgroupDir) {
        return new GpuRequest(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids,
                sharing, sharedMemory, owner, jobId, labels, hint, preferredNuma, maxDuration, requiredDevices, holder,
                ownerUid, Optional.of(checkCgroup(cgroupDir)), jobProcess);
    }

    /** @return a copy that records the job's own process (replacing any) */
    public GpuRequest withJobProcess(HolderProcess process) {
        Objects.requireNonNull(process, "process");
        return new GpuRequest(count, minMemory, minComputeCapability, vendor, modelPattern, deviceIndices, deviceUuids,
                sharing, sharedMemory, owner, jobId, labels, hint, preferredNuma, maxDuration, requiredDevices, holder,
                ownerUid, jobCgroup, Optional.of(process));
    }

    private static long checkUid(long uid) {
        if (uid < 0 || uid > 0xFFFF_FFFEL) {
            throw new IllegalArgumentException("owner uid must be 0 to 4294967294, was " + uid);
        }
        return uid;
    }

    static String checkCgroup(String dir) {
        Objects.requireNonNull(dir, "job cgroup");
        if (!dir.startsWith("/") || dir.length() > 4096 || dir.contains("/../") || dir.endsWith("/..")
                || dir.contains("/./") || dir.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
            throw new IllegalArgumentException("job cgroup must be an absolute, normalized path of printable"
                    + " characters (at most 4096), was \"" + dir.replaceAll("\\p{Cntrl}", "?") + "\"");
        }
        return dir;
    }

    /** @return true if specific devices were named */
    public boolean isExplicit() {
        return !deviceIndices.isEmpty() || !deviceUuids.isEmpty();
    }

    /** @return a short human description, e.g. {@code "2 GPUs with >= 40 GiB, cc >= 8.0"} */
    public String describe() {
        StringBuilder s = new StringBuilder();
        s.append(count).append(count == 1 ? " GPU" : " GPUs");
        List<String> parts = new ArrayList<>();
        vendor.ifPresent(v -> parts.add(v.name()));
        modelPattern.ifPresent(p -> parts.add("model " + p));
        minMemory.ifPresent(m -> parts.add(">= " + m.toHumanString()));
        minComputeCapability.ifPresent(c -> parts.add("compute capability >= " + c));
        // bounded as refusals are (Refusals): a request naming 1,024 GPUs is described in a line, not 5 KB
        if (!deviceIndices.isEmpty()) {
            parts.add("indices " + (deviceIndices.size() <= Refusals.LIST_ALL ? deviceIndices
                    : Refusals.ids(deviceIndices)));
        }
        if (!deviceUuids.isEmpty()) {
            parts.add("UUIDs " + Refusals.names(deviceUuids.size(), deviceUuids::get));
        }
        if (!requiredDevices.isEmpty()) {
            parts.add("including " + (requiredDevices.size() <= Refusals.LIST_ALL ? requiredDevices
                    : Refusals.ids(requiredDevices)));
        }
        sharedMemory.ifPresent(m -> parts.add("shared, " + m.toHumanString() + " reserved each"));
        if (!parts.isEmpty()) {
            s.append(" (").append(String.join(", ", parts)).append(')');
        }
        return s.toString();
    }

    /** The smallest shared reservation a request may make: 1 MiB, the unit of CUDA's MPS memory limit. */
    public static final long MIN_SHARED_BYTES = 1L << 20;

    /** @return a new builder (count 1, exclusive) */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Builds a {@link GpuRequest}. Each setter checks its argument at once and refuses to be called twice with
     * different values; {@link #build()} rejects contradictions between settings.
     */
    public static final class Builder {
        private Integer count;
        private MemorySize minMemory;
        private ComputeCapability minComputeCapability;
        private GpuVendor vendor;
        private String modelPattern;
        private final List<Integer> deviceIndices = new ArrayList<>();
        private final List<String> deviceUuids = new ArrayList<>();
        private SharingMode sharing;
        private MemorySize sharedMemory;
        private String owner;
        private String jobId;
        private final Map<String, String> labels = new LinkedHashMap<>();
        private WorkloadHint hint;
        private Integer preferredNuma;
        private Duration maxDuration;
        private List<Integer> requiredDevices;
        private HolderProcess holder;
        private Long ownerUid;
        private String jobCgroup;
        private HolderProcess jobProcess;
        private boolean recorded;

        private Builder() {
        }

        /**
         * Takes owner, job id and labels as a node ledger recorded them, without the bounds on identifiers: a ledger
         * written before them must still open (its readers escape what they print).
         */
        Builder recorded() {
            recorded = true;
            return this;
        }

        /**
         * @param uid the owner's Unix uid as the kernel vouched for it (peer credentials); hosts never copy it from a
         *            request's own claim @return this
         */
        public Builder ownerUid(long uid) {
            ownerUid = once(ownerUid, checkUid(uid), "owner uid");
            return this;
        }

        /** @param dir the cgroup directory of the job using the allocation (absolute path) @return this */
        public Builder jobCgroup(String dir) {
            jobCgroup = once(jobCgroup, checkCgroup(dir), "job cgroup");
            return this;
        }

        /** @param p the job's own process (a job run without a cgroup) @return this */
        public Builder jobProcess(HolderProcess p) {
            jobProcess = once(jobProcess, Objects.requireNonNull(p, "jobProcess"), "job process");
            return this;
        }

        /** @param h workload hint @return this */
        public Builder hint(WorkloadHint h) {
            hint = once(hint, h, "hint");
            return this;
        }

        /** @param node NUMA node to prefer @return this */
        public Builder preferredNuma(int node) {
            if (node < 0) {
                throw new IllegalArgumentException("NUMA node must be >= 0, was " + node);
            }
            preferredNuma = once(preferredNuma, node, "preferred NUMA node");
            return this;
        }

        /** @param d lease length: the allocation expires this long after it is made @return this */
        public Builder maxDuration(Duration d) {
            maxDuration = once(maxDuration, d, "lease");
            return this;
        }

        /**
         * Devices that must be part of the answer: the allocation holds these plus {@code count - n} more, chosen by
         * the strategy (topology-aware strategies choose the ones best connected to these).
         *
         * @param indices device indices, each at most once @return this
         */
        public Builder requiredDevices(List<Integer> indices) {
            requiredDevices = once(requiredDevices, List.copyOf(indices), "required devices");
            return this;
        }

        /** @param indices device indices that must be part of the answer @return this */
        public Builder requiredDevices(Integer... indices) {
            return requiredDevices(List.of(indices));
        }

        /**
         * Binds the allocation to a process: once that process is gone, the next change on the node reclaims the
         * allocation as a release would.
         *
         * @param p the holder (e.g. {@link HolderProcess#current()}) @return this
         */
        public Builder holder(HolderProcess p) {
            holder = once(holder, p, "holder process");
            return this;
        }

        private static <T> T once(T current, T value, String what) {
            Objects.requireNonNull(value, what);
            if (current != null && !current.equals(value)) {
                throw new IllegalStateException(what + " was already set to " + current + "; cannot set it to "
                        + value);
            }
            return value;
        }

        /** @param n GPUs wanted, at least 1 @return this */
        public Builder count(int n) {
            if (n < 1) {
                throw new IllegalArgumentException("GPU count must be at least 1, was " + n);
            }
            count = once(count, n, "count");
            return this;
        }

        /** @param m minimum total memory per GPU @return this */
        public Builder minMemory(MemorySize m) {
            minMemory = once(minMemory, m, "minimum memory");
            return this;
        }

        /** @param cc minimum compute capability @return this */
        public Builder minComputeCapability(ComputeCapability cc) {
            minComputeCapability = once(minComputeCapability, cc, "minimum compute capability");
            return this;
        }

        /** @param v vendor @return this */
        public Builder vendor(GpuVendor v) {
            vendor = once(vendor, v, "vendor");
            return this;
        }

        /** @param glob glob on the device name, {@code *} and {@code ?}, case-insensitive @return this */
        public Builder modelPattern(String glob) {
            modelPattern = once(modelPattern, glob, "model pattern");
            return this;
        }

        /** @param indices explicit device indices @return this */
        public Builder deviceIndices(List<Integer> indices) {
            if (!deviceIndices.isEmpty()) {
                throw new IllegalStateException("device indices were already set to " + deviceIndices);
            }
            deviceIndices.addAll(indices);
            return this;
        }

        /** @param indices explicit device indices @return this */
        public Builder deviceIndices(Integer... indices) {
            return deviceIndices(List.of(indices));
        }

        /** @param uuids explicit device UUIDs @return this */
        public Builder deviceUuids(List<String> uuids) {
            if (!deviceUuids.isEmpty()) {
                throw new IllegalStateException("device UUIDs were already set to " + deviceUuids);
            }
            for (String u : uuids) {
                if (u == null || u.isBlank()) {
                    throw new IllegalArgumentException("device UUIDs must not be blank: " + uuids);
                }
                deviceUuids.add(u.trim());
            }
            return this;
        }

        /** Exclusive use (the default). @return this */
        public Builder exclusive() {
            sharing = once(sharing, SharingMode.EXCLUSIVE, "sharing mode");
            return this;
        }

        /** @param reservation memory reserved on each GPU; makes the request SHARED @return this */
        public Builder shared(MemorySize reservation) {
            Objects.requireNonNull(reservation, "reservation");
            if (reservation.bytes() == 0) {
                throw new IllegalArgumentException("a shared memory reservation must be more than 0 bytes");
            }
            if (reservation.bytes() < MIN_SHARED_BYTES) {
                throw new IllegalArgumentException("a shared reservation must be at least 1 MiB (the unit of CUDA's"
                        + " CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, which a job gets), was " + reservation.bytes()
                        + " bytes; ask for e.g. 512MiB or 4GB");
            }
            return sharedAsRecorded(reservation);
        }

        /** As {@link #shared}, without the 1 MiB floor: for records written before it (the ledger's reader). */
        Builder sharedAsRecorded(MemorySize reservation) {
            sharing = once(sharing, SharingMode.SHARED, "sharing mode");
            sharedMemory = once(sharedMemory, reservation, "shared memory reservation");
            return this;
        }

        /**
         * @param o owner (user, tenant): printable, at most {@value GpuRequest#MAX_OWNER_LENGTH} characters, spaces
         *          around it dropped
         * @return this
         */
        public Builder owner(String o) {
            owner = once(owner, recorded ? asRecorded(o, "owner") : ownerText(o), "owner");
            return this;
        }

        /**
         * @param j job id: printable, at most {@value GpuRequest#MAX_JOB_ID_LENGTH} characters, spaces around it
         *          dropped
         * @return this
         */
        public Builder jobId(String j) {
            jobId = once(jobId, recorded ? asRecorded(j, "job id") : jobText(j), "job id");
            return this;
        }

        /**
         * @param key   label key: printable, at most {@value GpuRequest#MAX_LABEL_KEY_LENGTH} characters, spaces
         *              around it dropped
         * @param value label value: printable, at most {@value GpuRequest#MAX_LABEL_VALUE_LENGTH} characters (may be
         *              empty); at most {@value GpuRequest#MAX_LABELS} labels
         * @return this
         */
        public Builder label(String key, String value) {
            String k = recorded ? asRecorded(key, "label key") : identifier(key, "label key", MAX_LABEL_KEY_LENGTH);
            Objects.requireNonNull(value, "label value");
            if (!recorded) {
                Printable.requireIdentifier(value, "label " + k + "'s value", MAX_LABEL_VALUE_LENGTH, true);
                if (!labels.containsKey(k) && labels.size() >= MAX_LABELS) {
                    throw new IllegalArgumentException("label " + k + " is one too many: a request has at most "
                            + MAX_LABELS + " labels");
                }
            }
            labels.put(k, value);
            return this;
        }

        /** A value read back from a ledger: exactly as it was written (it was checked, or trimmed, when it entered). */
        private static String asRecorded(String s, String what) {
            requireText(s, what);
            return s;
        }

        static String ownerText(String o) {
            return identifier(o, "owner", MAX_OWNER_LENGTH);
        }

        static String jobText(String j) {
            return identifier(j, "job id", MAX_JOB_ID_LENGTH);
        }

        /**
         * Plain spaces around the text are dropped; anything else is checked as given (String.trim would drop an
         * escape character or a newline at either end without a word, and keep the rest).
         */
        private static String identifier(String s, String what, int max) {
            requireText(s, what);
            return Printable.requireIdentifier(spaces(s), what, max, false);
        }

        private static String spaces(String s) {
            int from = 0;
            int to = s.length();
            while (from < to && s.charAt(from) == ' ') {
                from++;
            }
            while (to > from && s.charAt(to - 1) == ' ') {
                to--;
            }
            return s.substring(from, to);
        }

        static String requireText(String s, String what) {
            if (s == null || s.isBlank()) {
                throw new IllegalArgumentException(what + " must not be blank");
            }
            return s.trim();
        }

        /**
         * @return the request
         * @throws IllegalArgumentException if count contradicts explicit devices, both indices and UUIDs are given,
         *                                  a shared request has no reservation, or similar
         */
        public GpuRequest build() {
            int explicit = Math.max(deviceIndices.size(), deviceUuids.size());
            int n = count != null ? count : Math.max(1, Math.max(explicit,
                    requiredDevices == null ? 0 : requiredDevices.size()));
            return new GpuRequest(n, Optional.ofNullable(minMemory), Optional.ofNullable(minComputeCapability),
                    Optional.ofNullable(vendor), Optional.ofNullable(modelPattern), deviceIndices, deviceUuids,
                    sharing == null ? SharingMode.EXCLUSIVE : sharing, Optional.ofNullable(sharedMemory),
                    Optional.ofNullable(owner), Optional.ofNullable(jobId), labels, Optional.ofNullable(hint),
                    preferredNuma == null ? OptionalInt.empty() : OptionalInt.of(preferredNuma),
                    Optional.ofNullable(maxDuration), requiredDevices == null ? List.of() : requiredDevices,
                    Optional.ofNullable(holder), ownerUid == null ? OptionalLong.empty() : OptionalLong.of(ownerUid),
                    Optional.ofNullable(jobCgroup), Optional.ofNullable(jobProcess));
        }
    }

    @Override
    public String toString() {
        return "GpuRequest[" + describe() + owner.map(o -> ", owner " + o).orElse("")
                + jobId.map(j -> ", job " + j).orElse("") + "]";
    }
}
