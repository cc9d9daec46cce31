package io.gpusched.yarn;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerStatistics;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;

/**
 * Where the time of gpusched's {@code allocateDevices} goes, per phase, on the {@link YarnComparison} corpus: the
 * offer (device lookup and health), the node-ledger read ({@link ContainerLedger#reconcile}: finished containers,
 * GPUs of other processes), the placement decision (the cache), and the ledger write, with the node ledger's forces
 * per call. Two ways of writing, measured in the same run, alternating rounds:
 * <ul>
 * <li>{@code combined}: the finished containers' releases and the new grant in one transaction
 * ({@link GpuScheduler#releaseAndAllocate}, one forced append; what the plugin does);
 * <li>{@code split}: each release, then the grant, as separate transactions (one forced append each; what the plugin
 * did before, kept here as the baseline).
 * </ul>
 * Single calls timed with {@link System#nanoTime()}; prints medians and the 10th/90th percentiles in microseconds.
 * Run: {@code java -cp test-classes:classes:deps io.gpusched.yarn.YarnAllocatePhases [rounds]}.
 */
public final class YarnAllocatePhases {

    private YarnAllocatePhases() {
    }

    /** Per-phase samples of one way of writing. */
    private static final class Samples {
        final List<long[]> calls = new ArrayList<>();
        long forces;
        long releases;
    }

    /**
     * @param args optional: rounds over the corpus per way (default 6; the first round of each is warm-up)
     */
    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 6;
        YarnComparison c = new YarnComparison();
        GpuschedDevicePlugin p = c.gpusched;
        GpuschedDevicePlugin.Node n = p.node();
        List<Set<Device>> offers = new ArrayList<>();
        for (YarnComparison.Case k : c.corpus) {
            offers.add(YarnComparison.offer(c.gpuschedDevices, k.offerMask()));
        }
        Samples combined = new Samples();
        Samples split = new Samples();
        for (int r = 0; r < rounds * 2; r++) {
            boolean isSplit = r % 2 == 1;
            round(p, n, c, offers, isSplit, r < 2 ? new Samples() : isSplit ? split : combined);
        }
        System.out.println("phase (us)            | combined: median [p10-p90] | split: median [p10-p90]");
        String[] names = {"offer (lookup+health)", "ledger read (reconcile)", "decide (cache)", "ledger write",
            "whole call"};
        for (int ph = 0; ph < names.length; ph++) {
            System.out.printf(Locale.ROOT, "%-22s| %s | %s%n", names[ph], stats(combined, ph), stats(split, ph));
        }
        System.out.printf(Locale.ROOT, "forces per call       | %.3f | %.3f%n",
                (double) combined.forces / combined.calls.size(), (double) split.forces / split.calls.size());
        System.out.printf(Locale.ROOT, "finished released/call| %.3f | %.3f%n",
                (double) combined.releases / combined.calls.size(), (double) split.releases / split.calls.size());
        p.close();
    }

    private static void round(GpuschedDevicePlugin p, GpuschedDevicePlugin.Node n, YarnComparison c,
            List<Set<Device>> offers, boolean split, Samples out) {
        GpuScheduler s = n.ledger.scheduler();
        LedgerStatistics before = s.ledgerStatistics().orElseThrow();
        for (int i = 0; i < offers.size(); i++) {
            int count = c.corpus.get(i).count();
            long t0 = System.nanoTime();
            Offer offer = n.offer(offers.get(i));
            long t1 = System.nanoTime();
            List<String> finished = n.ledger.reconcile(offer);
            long t2 = System.nanoTime();
            int[] chosen = p.decide(n, offer, count, offers.get(i).size());
            long t3 = System.nanoTime();
            if (chosen == null) {
                throw new IllegalStateException("case " + c.corpus.get(i) + " declined");
            }
            if (split) {
                for (String id : finished) {
                    s.release(id);
                }
                List<Integer> idx = Arrays.stream(chosen).boxed().toList();
                s.allocate(GpuRequest.builder().deviceIndices(idx).owner("yarn").jobId("c" + i)
                        .label(YarnContainerGpus.LABEL, "c" + i).build());
            } else if (!n.ledger.record(finished, chosen, Map.of("CONTAINER_ID", "c" + i), true)) {
                throw new IllegalStateException("case " + c.corpus.get(i) + " refused by the ledger");
            }
            long t4 = System.nanoTime();
            out.calls.add(new long[]{t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0});
            out.releases += finished.size();
        }
        out.forces += s.ledgerStatistics().orElseThrow().forces() - before.forces();
    }

    private static String stats(Samples s, int phase) {
        long[] v = s.calls.stream().mapToLong(a -> a[phase]).sorted().toArray();
        return String.format(Locale.ROOT, "%.1f [%.1f-%.1f]", v[v.length / 2] / 1e3, v[v.length / 10] / 1e3,
                v[v.length * 9 / 10] / 1e3);
    }
}
