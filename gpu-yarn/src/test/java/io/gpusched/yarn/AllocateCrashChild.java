package io.gpusched.yarn;

import io.gpusched.core.GpuInventories;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;

/**
 * The process {@link AllocateCrashTest} kills: a NodeManager's plugin calling {@code allocateDevices} on a DGX-1 as
 * fast as it can, random offers and counts, and printing {@code ACK <container id> <minors>} (flushed) for each grant
 * after the call returned, the moment YARN would launch the container.
 */
public final class AllocateCrashChild {

    private AllocateCrashChild() {
    }

    /** @param args state directory, random seed */
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, args[0]);
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        GpuschedDevicePlugin p = new GpuschedDevicePlugin(GpuInventories.simulated("dgx1-v100"), conf);
        Map<Integer, Device> byMinor = new HashMap<>();
        p.getDevices().forEach(d -> byMinor.put(d.getMinorNumber(), d));
        Random rnd = new Random(Long.parseLong(args[1]));
        long pid = ProcessHandle.current().pid();
        System.out.println("READY");
        System.out.flush();
        for (long n = 0;; n++) {
            int mask = 1 + rnd.nextInt(255);
            Set<Device> offer = new TreeSet<>();
            for (int i = 0; i < 8; i++) {
                if ((mask >> i & 1) == 1) {
                    offer.add(byMinor.get(i));
                }
            }
            int count = 1 + rnd.nextInt(Integer.bitCount(mask));
            String cid = "container_" + pid + "_" + n;
            Set<Device> got = p.allocateDevices(offer, count, Map.of("CONTAINER_ID", cid));
            if (!got.isEmpty()) {
                StringBuilder sb = new StringBuilder("ACK ").append(cid).append(' ');
                for (Device d : got) {
                    sb.append(d.getMinorNumber()).append(',');
                }
                System.out.println(sb);
                System.out.flush();
            }
        }
    }
}
