package io.gpusched.yarn.adversarial.reconcile;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.host.GpuNode;
import io.gpusched.testing.LedgerReader;
import io.gpusched.yarn.GpuschedDevicePlugin;
import io.gpusched.yarn.ReconcileChild;
import io.gpusched.yarn.YarnContainerGpus;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 37: a running container's record is never released by the reconcile, and no record is released twice, while
 * two follower processes reconcile the same node ledger every 5 ms (a NodeManager restart racing the old one) and are
 * killed ({@code SIGKILL}) at random moments, mid-reconcile included, and started again.
 *
 * <p>The test plays YARN: a container's devices cgroup is made before the plug-in records its GPUs (so "running" is
 * exact: the cgroup exists the whole time the record is live and the container runs), and removed when the container
 * ends. Before a container is ended, the ledger file (walked by this test, tolerating only a torn last line) must still
 * hold its record: a record released while its cgroup existed would be caught there. GPUs come back into YARN's offer
 * only once the file shows their record released, so every release is a follower's. At the end, with a writer having
 * cut any torn tail, {@link LedgerReader} (gpusched-testing's independent reader) must show each record released at
 * most once, every ended container released, every running one live, and no GPU held twice.
 *
 * <p>A killed follower's replacement is a standby JVM started ahead of the kill (two warm up at a time, the machine's
 * two cores, while the ledger is under attack), woken with {@code GO} right after the kill; the test goes on once it
 * follows ({@code READY}), as it did when each replacement was a JVM started after the kill. The standbys warm up on
 * scratch state directories of their own, never on the attacked ledger.
 */
@Tag("adversarial")
class EndedContainersKillAttackTest {

    /** Standbys warming up at once: the machine has 2 cores and the test JVM and the followers mostly wait. */
    static final int STANDBYS = 2;

    @TempDir
    Path tmp;
    /** started standbys, oldest first */
    final Deque<Standby> standbys = new ArrayDeque<>();
    int started;

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void killedAndRacingFollowersNeverReleaseARunningContainerAndReleaseEachEndedOneOnce() throws Exception {
        Path state = tmp.resolve("state");
        Path cgroups = Files.createDirectories(tmp.resolve("devices").resolve("hadoop-yarn"));
        Random rnd = new Random(37);
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        conf.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, "0");
        List<Process> followers = new ArrayList<>();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin yarn = new GpuschedDevicePlugin(inv, conf);
            Map<Integer, Device> byMinor = new HashMap<>();
            yarn.getDevices().forEach(d -> byMinor.put(d.getMinorNumber(), d));
            Map<String, Integer> indexOfUuid = new HashMap<>();
            inv.devices().forEach(d -> indexOfUuid.put(d.uuid(), d.index()));
            followers.add(follower(state, cgroups));
            followers.add(follower(state, cgroups));

            Map<String, Set<Integer>> running = new LinkedHashMap<>();
            Set<String> forever = new HashSet<>();
            List<String> ended = new ArrayList<>();
            int kills = 0;
            int n = 0;
            for (int op = 0; op < 400; op++) {
                Walk w = Walk.of(state.resolve("ledger"), indexOfUuid);
                Set<Integer> busy = new HashSet<>(w.heldGpus());
                running.values().forEach(busy::addAll);
                Set<Integer> free = new TreeSet<>(byMinor.keySet());
                free.removeAll(busy);
                if (!free.isEmpty() && (running.size() < 2 || rnd.nextBoolean())) {
                    String cid = "container_1700000000000_0001_01_" + String.format("%06d", ++n);
                    Files.createDirectory(cgroups.resolve(cid)); // running from here on
                    Set<Device> offer = new TreeSet<>();
                    free.forEach(i -> offer.add(byMinor.get(i)));
                    int count = 1 + rnd.nextInt(Math.min(2, free.size()));
                    Set<Device> got = yarn.allocateDevices(offer, count, Map.of("CONTAINER_ID", cid));
                    assertThat(got).as(cid + " from " + free).hasSize(count);
                    Set<Integer> mine = new TreeSet<>();
                    got.forEach(d -> mine.add(d.getMinorNumber()));
                    running.put(cid, mine);
                    if (forever.size() < 2) {
                        forever.add(cid);
                    }
                } else {
                    List<String> endable = running.keySet().stream().filter(c -> !forever.contains(c)).toList();
                    if (!endable.isEmpty()) {
                        String cid = endable.get(rnd.nextInt(endable.size()));
                        assertThat(w.liveContainers()).as("%s is running: its record is live (op %d)", cid, op)
                                .contains(cid);
                        Files.delete(cgroups.resolve(cid)); // YARN's postComplete
                        running.remove(cid);
                        ended.add(cid);
                    }
                }
                if (rnd.nextInt(12) == 0) { // somewhere in a reconcile, or between two
                    int which = rnd.nextInt(followers.size());
                    followers.get(which).toHandle().destroyForcibly();
                    followers.get(which).waitFor(30, TimeUnit.SECONDS);
                    followers.set(which, follower(state, cgroups));
                    kills++;
                }
                Thread.sleep(rnd.nextInt(4));
            }
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (System.nanoTime() < deadline) {
                Set<String> live = Walk.of(state.resolve("ledger"), indexOfUuid).liveContainers();
                if (ended.stream().noneMatch(live::contains)) {
                    break;
                }
                Thread.sleep(20);
            }
            for (Process p : followers) {
                p.toHandle().destroyForcibly();
                p.waitFor(30, TimeUnit.SECONDS);
            }
            yarn.close();
            try (GpuNode writer = GpuNode.builder().inventory(inv).stateDir(state).maintenanceInterval(Duration.ZERO)
                    .auditLogging(false).build()) {
                writer.scheduler().refresh(); // a writer's catch-up cuts a torn tail a kill left
            }

            Walk end = Walk.of(state.resolve("ledger"), indexOfUuid);
            LedgerReader check = LedgerReader.read(state);
            Map<String, Integer> releases = new HashMap<>();
            check.ended.forEach(e -> releases.merge(e.id(), 1, Integer::sum));
            assertThat(releases.values()).as("releases per record").allMatch(c -> c == 1);
            assertThat(end.liveContainers()).as("running containers keep their records; ended ones are released")
                    .containsExactlyInAnyOrderElementsOf(running.keySet());
            assertThat(check.live.keySet()).as("live by gpusched-testing's reader")
                    .containsExactlyInAnyOrderElementsOf(end.liveIds());
            List<String> uuids = new ArrayList<>();
            check.live.values().forEach(l -> uuids.addAll(l.uuids()));
            assertThat(uuids).as("no GPU held twice").doesNotHaveDuplicates();
            assertThat(ended.size()).as("containers ended").isGreaterThan(50);
            assertThat(kills).as("followers killed").isGreaterThan(10);
        } finally {
            for (Process p : followers) {
                p.toHandle().destroyForcibly();
            }
            for (Standby s : standbys) {
                s.process().toHandle().destroyForcibly();
            }
            for (Standby s : standbys) { // gone before @TempDir, which holds their scratch directories, is deleted
                s.process().waitFor(30, TimeUnit.SECONDS);
            }
        }
    }

    /**
     * @return a follower process of the state directory: the oldest standby, woken; another standby starts in its
     *         place
     */
    private Process follower(Path state, Path cgroups) throws Exception {
        while (standbys.size() < STANDBYS) {
            standbys.add(standby(state, cgroups));
        }
        Standby s = standbys.poll();
        standbys.add(standby(state, cgroups));
        assertThat(s.out().readLine()).as("the standby warmed up").isEqualTo("WARM");
        s.process().getOutputStream().write("GO\n".getBytes(StandardCharsets.UTF_8));
        s.process().getOutputStream().flush();
        assertThat(s.out().readLine()).as("the follower process started").isEqualTo("READY");
        return s.process();
    }

    private Standby standby(Path state, Path cgroups) throws Exception {
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
                ReconcileChild.class.getName(), state.toString(), cgroups.toString(), "5",
                tmp.resolve("standby-" + ++started).toString()).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        return new Standby(p, new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)));
    }

    /** A started {@link ReconcileChild} standby and its output. */
    record Standby(Process process, BufferedReader out) {
    }

    /** The ledger file walked by its documented format; only its last line may be torn (a kill mid-append). */
    record Walk(Map<String, String> containerOf, Map<String, Set<Integer>> gpusOf) {
        static Walk of(Path file, Map<String, Integer> indexOfUuid) throws Exception {
            ObjectMapper json = new ObjectMapper();
            Map<String, String> containerOf = new LinkedHashMap<>();
            Map<String, Set<Integer>> gpusOf = new LinkedHashMap<>();
            if (!Files.exists(file)) {
                return new Walk(containerOf, gpusOf);
            }
            String text = Files.readString(file, StandardCharsets.UTF_8);
            String[] lines = text.split("\n", -1);
            for (int i = 1; i < lines.length; i++) {
                String line = lines[i];
                if (line.isEmpty()) {
                    continue;
                }
                int a = line.indexOf(' ');
                int b = a < 0 ? -1 : line.indexOf(' ', a + 1);
                JsonNode n;
                try {
                    n = json.readTree(line.substring(b + 1));
                    if (b < 0) {
                        throw new IllegalStateException("no fields");
                    }
                } catch (Exception torn) {
                    assertThat(i).as("only the last line may be torn: " + line).isEqualTo(lines.length - 1);
                    break;
                }
                switch (n.path("op").asText()) {
                    case "A" -> {
                        String id = n.get("id").asText();
                        Set<Integer> gpus = new TreeSet<>();
                        n.get("devices").forEach(u -> gpus.add(indexOfUuid.get(u.asText())));
                        gpusOf.put(id, gpus);
                        containerOf.put(id, n.path("request").path("labels").path(YarnContainerGpus.LABEL).asText());
                    }
                    case "R" -> {
                        gpusOf.remove(n.get("id").asText());
                        containerOf.remove(n.get("id").asText());
                    }
                    case "S" -> throw new IllegalStateException("a compaction in a short test ledger");
                    default -> {}
                }
            }
            return new Walk(containerOf, gpusOf);
        }

        Set<String> liveContainers() {
            return new HashSet<>(containerOf.values());
        }

        Set<String> liveIds() {
            return containerOf.keySet();
        }

        Set<Integer> heldGpus() {
            Set<Integer> out = new HashSet<>();
            gpusOf.values().forEach(out::addAll);
            return out;
        }
    }
}
