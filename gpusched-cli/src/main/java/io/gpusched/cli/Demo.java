package io.gpusched.cli;

import io.gpusched.core.Allocation;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.host.StateDirectory;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The README's first command: detect the node (or fall back to a simulated DGX-1, saying so), show its GPUs and
 * link matrix, allocate a handful of requests, show each allocation, and release them.
 */
public final class Demo {

    /** Simulated profile used when no GPU backend is available. */
    public static final String FALLBACK_PROFILE = "dgx1-v100";

    private Demo() {
    }

    /** Runs the demo on whatever this host has. @param args ignored */
    public static void main(String[] args) {
        run(System.out, Optional.empty());
    }

    /**
     * Opens the node: the given simulated profile, else the detected backend, else the fallback simulation.
     *
     * @param out       where to say which node is used
     * @param simulate  a simulated profile or YAML path, to skip detection
     * @return the open inventory
     */
    public static GpuInventory openNode(PrintStream out, Optional<String> simulate) {
        if (simulate.isPresent()) {
            GpuInventory inv = GpuInventories.simulated(simulate.get());
            out.println("Using simulated node " + inv.backend() + " (asked for with --simulate).");
            return inv;
        }
        try {
            GpuInventory inv = GpuInventories.detect();
            out.println("Detected " + inv.devices().size() + " GPUs through backend " + inv.backend() + ".");
            return inv;
        } catch (BackendUnavailableException e) {
            out.println("No GPU backend is available here (" + String.join("; ", e.causes())
                    + "): running on a simulated " + FALLBACK_PROFILE + " node instead.");
            return GpuInventories.simulated(FALLBACK_PROFILE);
        }
    }

    /** @return 0 when every step worked (no usage is replayed: see {@link #run(PrintStream, Optional, Optional)}) */
    public static int run(PrintStream out, Optional<String> simulate) {
        return run(out, simulate, Optional.empty(), false);
    }

    /**
     * The demo, and on a simulated node the last hour of scripted usage replayed into its accounting store
     * ({@link DemoUsage}), so that {@code gpusched --simulate PROFILE report} shows it.
     *
     * @param stateDir {@code --state-dir} as given; empty: the {@link StateDirectory} rule for the simulated node
     * @return 0 when every step worked
     */
    public static int run(PrintStream out, Optional<String> simulate, Optional<Path> stateDir) {
        return run(out, simulate, stateDir, true);
    }

    private static int run(PrintStream out, Optional<String> simulate, Optional<Path> stateDir, boolean usage) {
        try (GpuInventory inv = openNode(out, simulate);
             GpuScheduler scheduler = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            out.println();
            out.println("GPUs:");
            out.print(Tables.devices(inv.devices()));
            out.println();
            out.println("Links:");
            out.print(Tables.topology(inv.devices(), inv.topology()));
            out.println();
            List<Allocation> made = new ArrayList<>();
            for (Step step : steps(inv)) {
                out.println("allocate " + step.label());
                try {
                    Allocation a = scheduler.allocate(step.request());
                    made.add(a);
                    out.println("  -> " + a.id() + " GPUs " + a.deviceIndices() + " " + a.sharing()
                            + a.sharedMemory().map(m -> ", " + m.toHumanString() + " reserved each").orElse(""));
                } catch (GpuAllocationException e) {
                    out.println("  -> refused (" + e.reason() + "): " + e.getMessage());
                }
            }
            out.println();
            out.println("Holding " + made.size() + " allocations; releasing them.");
            for (Allocation a : made) {
                scheduler.release(a.id());
            }
            out.println("Released; " + scheduler.allocations().size() + " allocations left, "
                    + scheduler.devices().stream().filter(d -> d.isIdle()).count() + " of "
                    + inv.devices().size() + " GPUs idle.");
            if (usage && inv.backend().startsWith(GpuInventories.SIMULATED_PREFIX)) {
                String profile = inv.backend().substring(GpuInventories.SIMULATED_PREFIX.length());
                DemoUsage.replay(out, simulate.orElse(profile), StateDirectory.forNode(stateDir, inv));
            }
            return 0;
        }
    }

    record Step(String label, GpuRequest request) {
    }

    /** Requests sized to the node: exclusive, by memory, explicit ids, shared, and one that must be refused. */
    static List<Step> steps(GpuInventory inv) {
        int n = inv.devices().size();
        MemorySize smallest = inv.devices().stream().map(d -> d.memory()).min(MemorySize::compareTo).orElseThrow();
        MemorySize half = MemorySize.ofMebibytes(Math.max(1, smallest.toMebibytes() / 2));
        MemorySize quarter = MemorySize.ofMebibytes(Math.max(1, smallest.toMebibytes() / 4));
        MemorySize tooBig = MemorySize.ofGibibytes(smallest.bytes() / (1L << 30) * 2 + 1);
        int pair = n >= 8 ? 2 : 1;
        int last = inv.devices().get(n - 1).index();
        List<Step> steps = new ArrayList<>();
        steps.add(new Step("--gpu=1 --shared=" + quarter + " (twice: packed onto one GPU)",
                GpuRequests.fromCliFlags("--gpu=1", "--shared=" + quarter, "--owner=dave")));
        steps.add(new Step("--gpu=1 --shared=" + quarter,
                GpuRequests.fromCliFlags("--gpu=1", "--shared=" + quarter, "--owner=erin")));
        steps.add(new Step("--gpu=" + pair + " (exclusive)",
                GpuRequests.fromCliFlags("--gpu=" + pair, "--owner=alice", "--job=train-1")));
        steps.add(new Step("--devices=" + last + " (explicit id)",
                GpuRequests.fromCliFlags("--devices=" + last, "--owner=carol")));
        steps.add(new Step("--gpu=1 --gpu-memory=" + half,
                GpuRequests.fromCliFlags("--gpu=1", "--gpu-memory=" + half, "--owner=bob")));
        steps.add(new Step("--gpu=1 --gpu-memory=" + tooBig + " (more than any GPU has)",
                GpuRequests.fromCliFlags("--gpu=1", "--gpu-memory=" + tooBig)));
        GpuVendor other = inv.devices().get(0).vendor() == GpuVendor.NVIDIA ? GpuVendor.AMD : GpuVendor.NVIDIA;
        steps.add(new Step("--vendor=" + other.name().toLowerCase() + " (not on this node)",
                GpuRequest.builder().vendor(other).build()));
        return steps;
    }
}
