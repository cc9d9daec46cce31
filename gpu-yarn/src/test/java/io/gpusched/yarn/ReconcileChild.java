package io.gpusched.yarn;

import io.gpusched.core.GpuInventories;
import org.apache.hadoop.conf.Configuration;

/**
 * A NodeManager's follower thread alone, for the reconcile attack test: the plug-in over a state directory and a
 * devices hierarchy given as arguments, reconciling every few milliseconds with no grace, until it is killed.
 * Prints {@code READY} once the follower runs.
 */
public final class ReconcileChild {

    private ReconcileChild() {
    }

    /** @param args state directory, devices hierarchy, reconcile interval in milliseconds */
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, args[0]);
        conf.set(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, args[1]);
        conf.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, args[2]);
        conf.set(GpuschedDevicePlugin.KEY_ENDED_GRACE_MS, "0");
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        GpuschedDevicePlugin p = new GpuschedDevicePlugin(GpuInventories.simulated("dgx1-v100"), conf);
        p.getDevices();
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
