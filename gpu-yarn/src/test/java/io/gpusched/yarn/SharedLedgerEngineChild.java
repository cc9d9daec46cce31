package io.gpusched.yarn;

import io.gpusched.core.GpuInventories;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;

/**
 * A NodeManager's device plug-in driven as YARN drives it, for the shared-directory test: run as the engine's own
 * service user, from the drop-in jar, on a state directory it shares with root through the state group
 * ({@code GPUSCHED_STATE_GROUP} in its environment). It keeps YARN's books itself: offers the GPUs no container of its
 * holds, starts containers ({@code ACK <container id> <minors>}) and finishes them ({@code FIN <container id>}), until
 * it has granted the number asked; then prints {@code DONE}.
 */
public final class SharedLedgerEngineChild {

    private SharedLedgerEngineChild() {
    }

    /** @param args state directory, random seed, grants to make */
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, args[0]);
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        conf.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, "0");
        GpuschedDevicePlugin p = new GpuschedDevicePlugin(GpuInventories.simulated("dgx1-v100"), conf);
        Map<Integer, Device> byMinor = new HashMap<>();
        p.getDevices().forEach(d -> byMinor.put(d.getMinorNumber(), d));
        Random rnd = new Random(Long.parseLong(args[1]));
        int want = Integer.parseInt(args[2]);
        Map<String, Set<Integer>> books = new HashMap<>();
        int granted = 0;
        for (long n = 0; granted < want; n++) {
            if (!books.isEmpty() && rnd.nextInt(10) < 4) {
                List<String> running = new ArrayList<>(books.keySet());
                String done = running.get(rnd.nextInt(running.size()));
                books.remove(done);
                System.out.println("FIN " + done);
                continue;
            }
            Set<Device> offer = new TreeSet<>();
            byMinor.forEach((m, d) -> {
                if (books.values().stream().noneMatch(s -> s.contains(m))) {
                    offer.add(d);
                }
            });
            if (offer.isEmpty()) {
                continue;
            }
            String cid = String.format("container_1700000000000_0001_01_%06d", n);
            Set<Device> got = p.allocateDevices(offer, 1 + rnd.nextInt(Math.min(2, offer.size())),
                    Map.of("CONTAINER_ID", cid));
            if (got.isEmpty()) {
                Thread.sleep(2); // root holds what YARN offers: YARN would place elsewhere
                continue;
            }
            Set<Integer> minors = new TreeSet<>();
            got.forEach(d -> minors.add(d.getMinorNumber()));
            books.put(cid, minors);
            granted++;
            StringBuilder line = new StringBuilder("ACK ").append(cid).append(' ');
            minors.forEach(m -> line.append(m).append(','));
            System.out.println(line);
        }
        p.close();
        System.out.println("DONE");
        System.out.flush();
    }
}
