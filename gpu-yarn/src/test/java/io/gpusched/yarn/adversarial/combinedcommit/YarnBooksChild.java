package io.gpusched.yarn.adversarial.combinedcommit;

import io.gpusched.core.GpuInventories;
import io.gpusched.yarn.GpuschedDevicePlugin;
import java.io.FileInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;

/**
 * A NodeManager's plug-in driven as YARN drives it: the child keeps YARN's books (which container holds which GPUs),
 * finishes containers at random and offers what the books say is free, so every call releases finished containers'
 * records. Prints {@code ACK <container id> <minors>} (flushed) after each grant returned. With {@code marked}, it
 * opens {@code <marker>-<n>} (a path that does not exist) before call n and after the last one, so a tracer of its
 * system calls can tell the calls apart.
 */
public final class YarnBooksChild {

    private YarnBooksChild() {
    }

    /** @param args state directory, seed, number of calls (0: forever), marker path prefix or "-" */
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, args[0]);
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        GpuschedDevicePlugin p = new GpuschedDevicePlugin(GpuInventories.simulated("dgx1-v100"), conf);
        Map<Integer, Device> byMinor = new HashMap<>();
        p.getDevices().forEach(d -> byMinor.put(d.getMinorNumber(), d));
        Random rnd = new Random(Long.parseLong(args[1]));
        long calls = Long.parseLong(args[2]);
        String marker = args[3];
        long pid = ProcessHandle.current().pid();
        Map<String, Set<Integer>> books = new LinkedHashMap<>();
        // one call before the measured ones: the ledger is created and opened
        p.allocateDevices(new TreeSet<>(byMinor.values()), 0, Map.of("CONTAINER_ID", "warmup"));
        System.out.println("READY");
        System.out.flush();
        int grants = 0;
        for (long n = 0; calls == 0 || n < calls; n++) {
            while (!books.isEmpty() && (rnd.nextInt(10) < 6 || books.size() > 3)) {
                List<String> ids = new ArrayList<>(books.keySet());
                books.remove(ids.get(rnd.nextInt(ids.size()))); // the container finished
            }
            Set<Integer> busy = new TreeSet<>();
            books.values().forEach(busy::addAll);
            Set<Device> offer = new TreeSet<>();
            for (int i = 0; i < 8; i++) {
                if (!busy.contains(i)) {
                    offer.add(byMinor.get(i));
                }
            }
            if (offer.isEmpty()) {
                books.clear();
                continue;
            }
            int count = rnd.nextInt(12) == 0 ? offer.size() + 1 : 1 + rnd.nextInt(Math.min(3, offer.size()));
            String cid = "container_" + pid + "_" + n;
            mark(marker, n);
            Set<Device> got = p.allocateDevices(offer, count, Map.of("CONTAINER_ID", cid));
            if (!got.isEmpty()) {
                grants++;
                Set<Integer> minors = new TreeSet<>();
                StringBuilder sb = new StringBuilder("ACK ").append(cid).append(' ');
                for (Device d : got) {
                    minors.add(d.getMinorNumber());
                    sb.append(d.getMinorNumber()).append(',');
                }
                books.put(cid, minors);
                System.out.println(sb);
                System.out.flush();
            } else {
                System.out.println("DECLINED " + cid);
                System.out.flush();
            }
        }
        mark(marker, calls);
        System.out.println("DONE " + grants);
        System.out.flush();
        p.close();
    }

    private static void mark(String marker, long n) {
        if (marker.equals("-")) {
            return;
        }
        try (FileInputStream in = new FileInputStream(marker + "-" + n)) {
            in.read();
        } catch (IOException expected) {
            // the path does not exist: the open alone is the mark
        }
    }
}
