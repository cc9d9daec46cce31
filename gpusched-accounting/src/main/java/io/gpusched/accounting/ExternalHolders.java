package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.core.UsageOwner;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * Pods and Slurm jobs that use this node's GPUs without a gpusched allocation (the kubelet or Slurm owns them), as
 * holders the meter tracks like allocations, so that the store records their usage and reports group by pod or by
 * Slurm job (docs/ACCOUNTING.md, "Pods and Slurm jobs").
 *
 * <p>At each sweep, every GPU no live allocation holds has its processes asked of the attribution chain; each pod or
 * Slurm job with a process there holds that GPU for the sweep, as a shared holder (its figures are its processes',
 * never the device's). It holds it from the first sweep one of its processes is listed to the first sweep none is
 * (a GPU whose list cannot be read keeps its holders: not measured, not ended). Its track's id is
 * {@code pod:<namespace>/<pod>@<first sweep, epoch ms>} or {@code slurm-job:<job id>@<...>}: a pod seen again after
 * its track ended is a new track, grouped with the first by its job ({@code <namespace>/<pod>}, the Slurm job id). The
 * idle policy never judges these holders: gpusched cannot release what it did not grant.
 */
final class ExternalHolders {
    /** The id prefix of a pod's track. */
    static final String POD = "pod:";
    /** The id prefix of a Slurm job's track. */
    static final String SLURM_JOB = "slurm-job:";
    /** How often a remembered pid's owner is asked again. */
    private static final long REVALIDATE_MILLIS = 10_000;
    /** Shared holders need a reservation; this one is never allocated, only recorded nowhere. */
    private static final MemorySize NO_RESERVATION = MemorySize.ofMebibytes(1);

    private final ProcessAttribution attribution;
    /** by key ({@code pod:<ns>/<pod>}): the holder now */
    private final Map<String, Allocation> holders = new LinkedHashMap<>();
    /** by key: the store's open track, which the first sweep continues when the holder is still there */
    private final Map<String, Interval> resumed = new HashMap<>();
    /** per device index, per pid: whom it works for, and when that was checked */
    private final Map<Integer, Map<Integer, Seen>> seen = new HashMap<>();
    private List<Allocation> last = List.of();
    /**
     * per GPU index: for how long (sweeps' forward steps) its processes could not be listed or none was answered for;
     * past {@link #MAX_UNLISTED_MILLIS} its holders lose it (a GPU that never lists again holds no pod for ever)
     */
    private final Map<Integer, Long> unlistedFor = new HashMap<>();
    /**
     * per GPU index, by key, for a track a restarted sampler carries there without an answer: the time from its last
     * record's end to the restart, which counts against its 5 minutes on that GPU (no sampler saw whether a source
     * answered for it then: a kill leaves the last checkpoint's; review64), each track and GPU its own (reviews 66,
     * 67: an answer for another track, or for this one on another GPU, is no evidence about this GPU), until that GPU
     * is answered for
     */
    private final Map<Integer, Map<String, Long>> sinceRecord = new HashMap<>();
    private static final TreeMap<Integer, GpuDevice> EMPTY = new TreeMap<>();
    static final long MAX_UNLISTED_MILLIS = 5 * 60_000;
    /** The most one sweep's step adds to {@link #unlistedFor}. */
    private static final long MAX_STEP_MILLIS = 60_000;
    private long lastSweep = Long.MIN_VALUE;
    /** per GPU index: the keys of the holders kept on it at this sweep without a source's answer */
    private final Map<Integer, Set<String>> carried = new HashMap<>();
    /** keys of tracks the store had open at the restart, kept on their GPUs since without a source's answer */
    private final Set<String> unconfirmed = new HashSet<>();

    /**
     * @param owner     whom the process works for
     * @param checkedAt when that was asked
     * @param staleFor  for how long (asks' forward steps) no source has answered for it: the last answer is kept up to
     *                  {@link #MAX_UNLISTED_MILLIS} (a kubelet down longer than its source's minute: review62)
     */
    private record Seen(Optional<UsageOwner> owner, long checkedAt, long staleFor) {
    }

    /**
     * The note on a pod's or job's GPU for an interval in which it was kept there without a source's answer (the GPU
     * not listed, or no source answering for its processes): a restarted sampler carries its track on that GPU only
     * when its last record has none (review62).
     */
    static final String CARRIED = "carried: kept on this GPU while its processes could not be listed or no source"
            + " answered for them";

    ExternalHolders(ProcessAttribution attribution) {
        this.attribution = attribution;
    }

    /**
     * @return whom a process listed on a GPU at this sweep works for, as this pass found it (the meter charges the
     *         external holders of a GPU by it: one answer per process and sweep for both)
     */
    Optional<UsageOwner> ownerSeen(int device, int pid) {
        Map<Integer, Seen> known = seen.get(device);
        Seen s = known == null ? null : known.get(pid);
        return s == null ? Optional.empty() : s.owner();
    }

    /** @return the keys of the holders kept on a GPU at this sweep without a source's answer ({@link #CARRIED}) */
    Set<String> carried(int device) {
        return carried.getOrDefault(device, Set.of());
    }

    /** @return whether an id is a pod's or a Slurm job's track */
    static boolean isExternal(String id) {
        return id.startsWith(POD) || id.startsWith(SLURM_JOB);
    }

    /** @return the key of an owner that is a pod or a Slurm job; null for an allocation */
    static String key(UsageOwner o) {
        return switch (o.kind()) {
            case POD -> POD + o.id();
            case SLURM_JOB -> SLURM_JOB + o.id();
            case ALLOCATION -> null;
        };
    }

    /** @return the key a track's id is of ({@code pod:<ns>/<pod>}), or null for an allocation's id */
    static String keyOf(String id) {
        if (!isExternal(id)) {
            return null;
        }
        int at = id.lastIndexOf('@');
        return at < 0 ? id : id.substring(0, at);
    }

    /**
     * The store's open tracks (a restarted sampler): those of external holders continue when they are still there, or
     * when the first sweep cannot list their GPUs.
     */
    void resume(Collection<Interval> open) {
        for (Interval iv : open) {
            String k = keyOf(iv.allocationId());
            if (k != null) {
                resumed.put(k, iv);
            }
        }
    }

    /**
     * @return whether a GPU's processes could not be listed this sweep: no per-process answer, or an empty list that
     *         says neither its processes' memory nor their utilization is measured (NVML, nvidia-smi and ROCm SMI
     *         answer a failed listing so: review59). An empty list with either measured is a GPU with no process (a
     *         driver without the running-process call lists processes by their utilization samples and never
     *         measures their memory: review60).
     */
    static boolean unlisted(Optional<ProcessUsageSample> ps) {
        return ps.isEmpty() || ps.get().processes().isEmpty() && ps.get().memoryUnmeasured().isPresent()
                && ps.get().utilizationUnmeasured().isPresent();
    }

    /** The request a resumed track is continued with: as its record names owner, uid and job. */
    private static GpuRequest request(Interval tail) {
        GpuRequest.Builder b = GpuRequest.builder().shared(NO_RESERVATION);
        try {
            tail.owner().ifPresent(b::owner);
            tail.ownerUid().ifPresent(b::ownerUid);
            tail.jobId().ifPresent(b::jobId);
        } catch (IllegalArgumentException e) {
            // as recorded, one the builder refuses: left out
        }
        return b.build();
    }

    /**
     * @param now     the sweep's time
     * @param devices the node's GPUs
     * @param live    the live allocations (their GPUs are theirs)
     * @param usage   per-process usage of a GPU (this sweep's: the meter reads the same)
     * @return the external holders of this sweep, the same objects as the previous sweep's while nothing changed
     */
    List<Allocation> sweep(Instant now, List<GpuDevice> devices, List<Allocation> live,
            Function<GpuDevice, Optional<ProcessUsageSample>> usage) {
        long t = now.toEpochMilli();
        carried.clear();
        // the time a GPU goes unlisted is counted in the sweeps' forward steps, each at most MAX_STEP_MILLIS: a clock
        // stepped back adds nothing, one stepped ahead no more than a sweep's worth (review61)
        long step = lastSweep == Long.MIN_VALUE ? 0 : Math.min(MAX_STEP_MILLIS, Math.max(0, t - lastSweep));
        if (lastSweep != Long.MIN_VALUE && t - lastSweep > UsageMeter.MAX_SWEEP_MILLIS) {
            // the clock jumped ahead and stayed: the meter records the time since as a gap its holders held, which
            // one kept without an answer has no ground for; it is no longer kept (review68)
            step = MAX_UNLISTED_MILLIS + 1;
        }
        lastSweep = t;
        Set<Integer> held = new HashSet<>();
        for (Allocation a : live) {
            for (GpuDevice d : a.devices()) {
                held.add(d.index());
            }
        }
        Map<String, TreeMap<Integer, GpuDevice>> using = new LinkedHashMap<>();
        Map<String, UsageOwner> owners = new HashMap<>();
        for (GpuDevice d : devices) {
            if (held.contains(d.index())) {
                seen.remove(d.index());
                unlistedFor.remove(d.index());
                sinceRecord.remove(d.index());
                continue;
            }
            Optional<ProcessUsageSample> ps = usage.apply(d);
            boolean answered = !unlisted(ps);
            if (answered) {
                Map<Integer, Seen> known = seen.computeIfAbsent(d.index(), x -> new HashMap<>());
                Set<Integer> pids = new HashSet<>();
                boolean anyOwner = ps.get().processes().isEmpty(); // no process: answered, nobody there
                boolean anyFresh = false;
                Map<String, UsageOwner> here = new LinkedHashMap<>();
                Set<String> staleKeys = new HashSet<>();
                for (GpuProcessUsage p : ps.get().processes()) {
                    pids.add(p.pid());
                    Seen s = known.get(p.pid());
                    // asked again every REVALIDATE_MILLIS whatever the process's incarnation: a pod source answers
                    // from the kubelet's list as it stands, not from the process, so an answer given while the
                    // kubelet was down, or before it listed the GPU's next pod, changes (review60)
                    if (s == null || t < s.checkedAt() || t - s.checkedAt() >= REVALIDATE_MILLIS) {
                        Optional<UsageOwner> fresh = attribution.ownerOf(d, p.pid(), List.of());
                        long stale = s == null ? 0 : s.staleFor() + Math.min(MAX_STEP_MILLIS,
                                Math.max(0, t - s.checkedAt()));
                        if (fresh.isEmpty() && s != null && s.owner().isPresent() && stale <= MAX_UNLISTED_MILLIS) {
                            // the same process, still listed, and no source answers for it now (a kubelet down past
                            // its source's minute): still its pod's, for at most the bound (review62)
                            s = new Seen(s.owner(), t, stale);
                        } else {
                            s = new Seen(fresh, t, 0);
                        }
                        known.put(p.pid(), s);
                    }
                    if (s.owner().isPresent()) {
                        anyOwner = true;
                        anyFresh |= s.staleFor() == 0;
                        String k = key(s.owner().get());
                        if (k != null) {
                            here.putIfAbsent(k, s.owner().get());
                            if (s.staleFor() > 0) {
                                staleKeys.add(k);
                            }
                        }
                    }
                }
                known.keySet().retainAll(pids);
                // a GPU whose only answers are kept ones (no source answered afresh) is counted as one not answered
                // for: the two 5-minute bounds are one, not one after the other (review63)
                boolean within = anyFresh || here.isEmpty()
                        || unlistedFor.merge(d.index(), step, Long::sum) <= MAX_UNLISTED_MILLIS;
                if (within) {
                    for (Map.Entry<String, UsageOwner> e : here.entrySet()) {
                        using.computeIfAbsent(e.getKey(), x -> new TreeMap<>()).put(d.index(), d);
                        owners.putIfAbsent(e.getKey(), e.getValue());
                        if (staleKeys.contains(e.getKey())) {
                            carried.computeIfAbsent(d.index(), x -> new HashSet<>()).add(e.getKey());
                        }
                    }
                }
                if (!anyFresh && !here.isEmpty()) {
                    continue; // counted above: its holders are those answers, while within the bound
                }
                if (!anyOwner && (!unconfirmed.isEmpty() || !resumed.isEmpty())) {
                    // processes listed but none answered for, on a GPU a track the store had open at the restart
                    // holds: the sources may not answer yet (a kubelet not up, a list not read yet), which is not
                    // "nobody's"; it keeps that track, as an unlisted GPU does, until one answers (review61)
                    answered = false;
                }
            }
            if (answered) {
                unlistedFor.remove(d.index());
                sinceRecord.remove(d.index());
                continue;
            }
            boolean listed = !unlisted(ps);
            // not listed, or no process of it answered for: its holders keep it, not measured, while it has been so
            // for at most MAX_UNLISTED_MILLIS of sweeps (a GPU that never lists again holds no pod for ever); at a
            // restarted sampler's first sweep, the tracks its store has open on it, when their last record measured
            // it (one not measured then had stopped listing before: its time is not started over; review61)
            long gone = unlistedFor.merge(d.index(), step, Long::sum);
            if (gone > MAX_UNLISTED_MILLIS) {
                continue;
            }
            for (Allocation a : last) {
                String k = keyOf(a.id());
                if (a.devices().contains(d) && (!listed || unconfirmed.contains(k))
                        && gone + sinceRecord.getOrDefault(d.index(), Map.of()).getOrDefault(k,
                                0L) <= MAX_UNLISTED_MILLIS) {
                    using.computeIfAbsent(keyOf(a.id()), x -> new TreeMap<>()).put(d.index(), d);
                    carried.computeIfAbsent(d.index(), x -> new HashSet<>()).add(keyOf(a.id()));
                }
            }
            for (Map.Entry<String, Interval> r : resumed.entrySet()) {
                Interval tail = r.getValue();
                for (AccountingRecord.DeviceUsage u : tail.devices()) {
                    // only a track its last record shows held there by a source's answer, and within the bound of
                    // the time since that record: one already kept without an answer is not kept again from a
                    // restart (reviews 61, 62)
                    long since = t - tail.to().toEpochMilli();
                    if (u.index() == d.index() && !u.notes().contains(CARRIED) && since <= MAX_UNLISTED_MILLIS) {
                        // for what is left of its bound: the time since its last record counts (reviews 64, 66)
                        sinceRecord.computeIfAbsent(d.index(), x -> new HashMap<>()).merge(r.getKey(),
                                Math.max(0, since), Math::max);
                        using.computeIfAbsent(r.getKey(), x -> new TreeMap<>()).put(d.index(), d);
                        carried.computeIfAbsent(d.index(), x -> new HashSet<>()).add(r.getKey());
                        unconfirmed.add(r.getKey());
                    }
                }
            }
        }
        unlistedFor.keySet().removeIf(i -> devices.stream().noneMatch(d -> d.index() == i));
        unconfirmed.removeIf(k -> owners.containsKey(k) || !using.containsKey(k));
        if (!sinceRecord.isEmpty()) {
            // kept while the track is carried on that GPU without an answer (the GPU answered for: removed above)
            sinceRecord.entrySet().removeIf(e -> {
                e.getValue().keySet().removeIf(k -> !using.getOrDefault(k, EMPTY).containsKey(e.getKey())
                        || !carried.getOrDefault(e.getKey(), Set.of()).contains(k));
                return e.getValue().isEmpty();
            });
        }
        List<Allocation> out = new ArrayList<>(using.size());
        boolean same = using.size() == last.size();
        for (Map.Entry<String, TreeMap<Integer, GpuDevice>> e : using.entrySet()) {
            List<GpuDevice> ds = List.copyOf(e.getValue().values());
            Allocation was = holders.get(e.getKey());
            Allocation a;
            if (was != null && was.devices().equals(ds)) {
                a = was;
            } else if (was != null) {
                a = new Allocation(was.id(), ds, was.request(), was.createdAt());
            } else if (owners.containsKey(e.getKey())) {
                Interval tail = resumed.get(e.getKey());
                String id = tail != null ? tail.allocationId() : e.getKey() + "@" + t;
                a = new Allocation(id, ds, request(owners.get(e.getKey())), now);
            } else if (resumed.containsKey(e.getKey())) {
                // the store's open track on a GPU this first sweep cannot list: continued as its record says
                a = new Allocation(resumed.get(e.getKey()).allocationId(), ds, request(resumed.get(e.getKey())),
                        now);
            } else {
                continue; // kept only by an unread list, and new: not a holder
            }
            holders.put(e.getKey(), a);
            same &= was == a; // the holders map is the last sweep's list: same size, same objects
            out.add(a);
        }
        holders.keySet().retainAll(using.keySet());
        resumed.clear();
        if (same) {
            return last;
        }
        last = List.copyOf(out);
        return last;
    }

    /** The request a holder is recorded with: owner, uid and job as the source names them. */
    private static GpuRequest request(UsageOwner o) {
        GpuRequest.Builder b = GpuRequest.builder().shared(NO_RESERVATION);
        Map<String, String> labels = o.labels();
        String name = null;
        if (o.kind() == UsageOwner.Kind.POD) {
            int slash = o.id().indexOf('/');
            name = labels.getOrDefault("namespace", slash > 0 ? o.id().substring(0, slash) : o.id());
        } else {
            // a Slurm job's user, as the source names it (SlurmJobAttribution: the owner of the job's process)
            name = labels.get("user");
            try {
                long uid = Long.parseLong(labels.getOrDefault("uid", ""));
                b.ownerUid(uid);
                if (name == null) {
                    name = "uid " + uid; // no user name has a space: never another user's
                }
            } catch (IllegalArgumentException e) {
                // no uid named
            }
        }
        if (name != null) {
            try {
                b.owner(name);
            } catch (IllegalArgumentException e) {
                // not printable or too long: no owner
            }
        }
        String job = o.id().length() > GpuRequest.MAX_JOB_ID_LENGTH ? o.id().substring(0,
                GpuRequest.MAX_JOB_ID_LENGTH) : o.id();
        try {
            b.jobId(job);
        } catch (IllegalArgumentException e) {
            // not printable: no job id
        }
        return b.build();
    }
}
