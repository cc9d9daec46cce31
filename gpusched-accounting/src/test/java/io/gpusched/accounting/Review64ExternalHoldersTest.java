package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 64: pods and Slurm jobs as holders of GPUs no allocation holds (ExternalHolders), after review63's fixes
 * (503fc314): the {@code carried:} note says how a record ends, and a restarted sampler carries a track only when its
 * last record has no such note and ended within 5 minutes.
 */
class Review64ExternalHoldersTest {
    private static final Instant T0 = AccountingNode.T0;
    private static final Duration STEP = Duration.ofSeconds(10);
    private static final int GPU = 1;
    private static final long BOUND_S = ExternalHolders.MAX_UNLISTED_MILLIS / 1000;

    @TempDir
    Path dir;

    private final Map<Integer, UsageOwner> owners = new ConcurrentHashMap<>();
    private final boolean[] kubeletUp = {true};

    /** PodResources as it answers: nothing while the kubelet is down. */
    private final ProcessAttribution podResources = new ProcessAttribution() {
        @Override
        public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
            return kubeletUp[0] ? Optional.ofNullable(owners.get(pid)) : Optional.empty();
        }

        @Override
        public boolean namesOthers() {
            return true;
        }
    };

    private static UsageOwner pod(String ns, String name) {
        return new UsageOwner(UsageOwner.Kind.POD, ns + "/" + name, Map.of("namespace", ns, "pod", name,
                "container", "main", "resource", "nvidia.com/gpu"));
    }

    private static List<Interval> intervals(AccountingStore store, String prefix) {
        List<Interval> out = new ArrayList<>();
        for (var d : store.days()) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv && iv.allocationId().startsWith(prefix)) {
                    out.add(iv);
                }
            }, new ArrayList<>());
        }
        return out;
    }

    /** Kills the node's sampler (what a kill -9 leaves, copied to {@code killed}) and starts another over the copy. */
    private static AccountingSampler killAndRestart(AccountingNode n, Path killed, AccountingSettings settings) {
        AccountingSampler first = n.sampler;
        AccountingStore copy = n.killedCopy(killed);
        n.scheduler.removeListener(first);
        n.sampler = AccountingSampler.open(copy, settings, n.inventory, n.attribution,
                new HostIdleEffects(n.scheduler), n.clock).orElseThrow();
        n.scheduler.addListener(n.sampler);
        n.sampler.knownLive(n.scheduler.allocations());
        return first;
    }

    /**
     * Review62's case (a restart in the checkpoint interval in which the GPU stopped listing does not start the 5-minute
     * bound over), with the sampler killed (kill -9, the OOM killer, a node agent's hard restart) instead of stopped.
     * A planned stop writes the pod's record up to its last sweep, noted {@code carried:} (the record ends kept without
     * an answer), and the restarted sampler drops the track. A kill leaves the last checkpoint's record, which ended
     * while GPU 1 still listed the pod's process: no note, ended within 5 minutes of the restart, so the restarted
     * sampler carries the track and counts the 5 minutes from its own first sweep. Nothing a kill leaves says the pod
     * had been kept without an answer since (the sweep mark holds only the idle policy's latest sweep; no record is
     * written when a track turns carried, as one is when an allocation turns busy: review42). With
     * {@code gpu.accounting.checkpoint: 5m}, GPU 1 lists nothing from T0 + 320 s and the pod is charged GPU 1 until
     * about T0 + 890 s: 9 min 30 s kept without a source's answer, nearly twice the bound.
     */
    @Test
    void aKillInTheCheckpointIntervalTheGpuStoppedListingInDoesNotStartTheBoundOver() {
        owners.put(101, pod("ml", "train"));
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5));
        Path killed = dir.resolve("killed");
        AccountingSampler first = null;
        try (AccountingNode n = new AccountingNode(dir.resolve("node"), settings,
                podResources.orElse(ProcessAttribution.none()))) {
            n.inventory.setProcessTraces(GPU, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(STEP, 31); // T0 + 310 s: listed and answered for (a checkpoint at T0 + 300 s)
            n.inventory.setProcessTraces(GPU, Map.of()); // GPU 1 answers no per-process figures from now on
            n.run(STEP, 27); // to T0 + 580 s: unlisted since T0 + 320 s, within the bound
            first = killAndRestart(n, killed, settings); // kill -9 right after the sweep at T0 + 580 s
            n.run(STEP, 62); // to T0 + 1200 s
        } finally {
            if (first != null) {
                first.close(); // the killed one (it writes to its own directory, not the copy)
            }
        }
        AccountingStore store = AccountingStore.at(killed);
        List<Interval> track = intervals(store, "pod:ml/train@");
        assertThat(track).as("the pod was recorded on GPU 1").isNotEmpty();
        assertThat(track.stream().map(Interval::allocationId).distinct()).hasSize(1);
        Interval last = track.stream().filter(iv -> iv.end().isPresent()).findFirst().orElseThrow(
                () -> new AssertionError("expected the pod's track to end (GONE) once its GPU had not listed for 5"
                        + " minutes, kill or not; it never ended: last interval " + track.get(track.size() - 1)
                                .from()
                        + ".." + track.get(track.size() - 1).to()));
        assertThat(last.to()).as("GPU 1 listed nothing from T0 + 320 s: the pod kept there without an answer for at"
                + " most the bound (%d s), not for the bound again from the restart after a kill (T0 + 590 s); the"
                + " last record before the kill (to %s) said nothing of the sweeps after it", BOUND_S,
                track.stream().filter(iv -> !iv.to().isAfter(T0.plusSeconds(580))).reduce((a, b) -> b)
                        .map(Interval::to).orElse(null))
                .isBeforeOrEqualTo(T0.plusSeconds(320 + BOUND_S));
    }

    /**
     * The same kill during a kubelet outage (review63: "a kept answer counts against the same 5 minutes as a GPU that
     * cannot be listed"). GPU 1 lists the pod's process throughout; the kubelet stops answering from T0 + 320 s; the
     * running sampler keeps the pod on its last answer (noted {@code carried:} in the record a stop would write) and
     * would drop it at about T0 + 620 s. Killed at T0 + 580 s, it leaves the checkpoint of T0 + 300 s, answered for,
     * as the pod's last record: the restarted sampler, its first sweep finding the kubelet still down ("not up yet"),
     * carries the track as unconfirmed for 5 minutes from T0 + 590 s, so the pod is kept on GPU 1 without any answer
     * for about 9 min 30 s.
     */
    @Test
    void aKillDuringAKubeletOutageDoesNotStartTheKeptAnswersBoundOver() {
        owners.put(101, pod("ml", "train"));
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5));
        Path killed = dir.resolve("killed");
        AccountingSampler first = null;
        try (AccountingNode n = new AccountingNode(dir.resolve("node"), settings,
                podResources.orElse(ProcessAttribution.none()))) {
            n.inventory.setProcessTraces(GPU, Map.of(101, UsageTrace.of(STEP, 60))); // listed throughout
            n.sweep();
            n.run(STEP, 31); // T0 + 310 s: answered for (a checkpoint at T0 + 300 s)
            kubeletUp[0] = false; // no source answers for the pod's process from now on
            n.run(STEP, 27); // to T0 + 580 s: kept on its last answer, within the bound
            first = killAndRestart(n, killed, settings); // kill -9 right after the sweep at T0 + 580 s
            n.run(STEP, 62); // to T0 + 1200 s
        } finally {
            if (first != null) {
                first.close();
            }
        }
        List<Interval> track = intervals(AccountingStore.at(killed), "pod:ml/train@");
        assertThat(track).as("the pod was recorded on GPU 1").isNotEmpty();
        Interval last = track.stream().filter(iv -> iv.end().isPresent()).findFirst().orElseThrow(
                () -> new AssertionError("expected the pod's track to end (GONE) once no source had answered for"
                        + " it for 5 minutes, kill or not; it never ended: last interval " + track.get(
                                track.size() - 1).from()
                        + ".." + track.get(track.size() - 1).to()));
        assertThat(last.to()).as("no source answered for the pod from T0 + 320 s: kept on its last answer for at"
                + " most the bound (%d s) in all, not for the bound again from the restart after a kill"
                + " (T0 + 590 s)", BOUND_S).isBeforeOrEqualTo(T0.plusSeconds(320 + BOUND_S));
    }

    /**
     * "Clock steps: a sweep more than 10 minutes after the previous one ... is a jump of the wall clock, not a sample:
     * it credits, writes and prunes nothing ... if it comes back, only the time to that next sweep is recorded"; an
     * allocation first seen at such a sweep is "tracked from its grant" (the ledger's time). A pod first seen at it
     * has no grant: ExternalHolders makes its holder with the jumped sweep's time as its creation, and the meter tracks
     * it from there (UsageMeter.start: {@code from = createdAt}), an hour ahead of the clock that comes back at the
     * next sweep. Nothing of the pod is credited until the clock reaches that time: a notebook pod whose process
     * started on GPU 1 at the sweep an NTP glitch stepped the clock 1 h ahead for, and that used the GPU for the 30
     * minutes after the clock came back, is recorded with no GPU time at all (a pod first seen one sweep later is
     * recorded from that sweep).
     */
    @Test
    void aPodFirstSeenAtASweepTheClockJumpedAheadForIsChargedOnceTheClockComesBack() {
        owners.put(101, pod("ml", "notebook"));
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1));
        try (AccountingNode n = new AccountingNode(dir.resolve("node"), settings,
                podResources.orElse(ProcessAttribution.none()))) {
            n.sweep();
            n.run(STEP, 6); // to T0 + 60 s: nothing on GPU 1
            n.inventory.setProcessTraces(GPU, Map.of(101, UsageTrace.of(STEP, 60))); // the pod's process starts
            n.clock.advance(Duration.ofHours(1).plus(STEP)); // the clock jumps 1 h ahead for one sweep
            n.sweep(); // T0 + 1 h + 70 s: a jump, not a sample; the pod first seen here
            n.clock.set(T0.plusSeconds(80)); // and comes back
            n.sweep();
            n.run(STEP, 180); // to T0 + 1880 s: the pod's process busy on GPU 1 throughout
            n.stopSampler(); // a planned stop: its last records are written
        }
        List<Interval> track = intervals(AccountingStore.at(dir.resolve("node")), "pod:ml/notebook@");
        long heldMillis = track.stream().flatMap(iv -> iv.devices().stream())
                .mapToLong(d -> d.figures().heldMillis()).sum();
        assertThat(heldMillis).as("the pod's process was listed on GPU 1 from T0 + 80 s to T0 + 1880 s (30 minutes"
                + " after the clock came back): expected about 1800 s of GPU time for pod ml/notebook; its track (%s)"
                + " starts at the jumped sweep's time, an hour ahead, and nothing was credited",
                track.stream()
                        .map(iv -> iv.allocationId() + " " + iv.from() + ".." + iv.to()).toList())
                .isGreaterThanOrEqualTo(1700_000L);
    }
}
