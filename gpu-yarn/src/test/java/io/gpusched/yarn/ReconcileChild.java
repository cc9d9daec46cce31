package io.gpusched.yarn;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;

/**
 * A NodeManager's follower thread alone, for the reconcile attack test: the plug-in over a state directory and a
 * devices hierarchy given as arguments, reconciling every few milliseconds with no grace, until it is killed.
 * Prints {@code READY} once the follower runs.
 *
 * <p>With a fourth argument, a scratch directory, it starts as a standby: it first runs the same plug-in once over a
 * state directory and an empty devices hierarchy of its own there (so the JVM has loaded and compiled what a follower
 * runs), closes it, prints {@code WARM} and waits for a {@code GO} line on its standard input; only then does it
 * follow the given state directory as above. It exits, following nothing, when its standard input ends first.
 */
public final class ReconcileChild {

    private ReconcileChild() {
    }

    /** @param args state directory, devices hierarchy, reconcile interval in milliseconds[, standby's scratch dir] */
    public static void main(String[] args) throws Exception {
        if (args.length > 3) {
            Path scratch = Path.of(args[3]);
            Path cgroups = Files.createDirectories(scratch.resolve("devices"));
            try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
                GpuschedDevicePlugin warm = new GpuschedDevicePlugin(inv,
                        conf(scratch.resolve("state").toString(), cgroups.toString(), args[2]));
                // one record whose container has no cgroup: the reconciles that follow release it
                warm.allocateDevices(warm.getDevices(), 1, Map.of("CONTAINER_ID",
                        "container_1700000000000_0001_01_000001"));
                Thread.sleep(50);
                warm.close();
            }
            System.out.println("WARM");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            if (!"GO".equals(in.readLine())) {
                return;
            }
        }
        GpuschedDevicePlugin p = new GpuschedDevicePlugin(GpuInventories.simulated("dgx1-v100"),
                conf(args[0], args[1], args[2]));
        p.getDevices();
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    private static Configuration conf(String state, String cgroups, String interval) {
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, state);
        conf.set(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, cgroups);
        conf.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, interval);
        conf.set(GpuschedDevicePlugin.KEY_ENDED_GRACE_MS, "0");
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        return conf;
    }
}
