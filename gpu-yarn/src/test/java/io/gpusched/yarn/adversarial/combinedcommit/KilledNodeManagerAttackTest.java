package io.gpusched.yarn.adversarial.combinedcommit;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A NodeManager killed ({@code SIGKILL}) at random points of {@code allocateDevices}, restarted on the same node
 * ledger (its YARN books lost, as after a restart, so its first calls finish every old container), while another
 * process of the node (a scheduler in this JVM, as the CLI or Spark would be) allocates and releases single GPUs all
 * along. Judged from the ledger file by {@link LedgerWalk}: no GPU is ever granted while a live record holds it, every
 * grant a NodeManager acknowledged is in the file with the GPUs it acknowledged, and the other process's records end
 * only by its own releases (the plug-in releases container records only).
 */
@Tag("adversarial")
class KilledNodeManagerAttackTest {

    @TempDir
    Path state;

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void killsWhileAnotherProcessAllocatesNeverGrantAGpuTwice() throws Exception {
        Map<String, Set<Integer>> acked = new HashMap<>();
        Set<String> othersMade = ConcurrentHashMap.newKeySet();
        Set<String> othersReleased = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> otherFailed = new AtomicReference<>();
        Random rnd = new Random(2324);
        try (GpuInventory otherInv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler other = GpuScheduler.builder().inventory(otherInv).stateDir(state).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).build()) {
            Thread cli = new Thread(() -> {
                Random r = new Random(7);
                List<String> mine = new ArrayList<>();
                try {
                    while (!stop.get()) {
                        if (mine.size() < 2 && r.nextBoolean()) {
                            Optional<Allocation> a = other.tryAllocate(GpuRequest.builder().count(1).owner("cli")
                                    .build());
                            a.ifPresent(x -> {
                                othersMade.add(x.id());
                                mine.add(x.id());
                            });
                        } else if (!mine.isEmpty()) {
                            String id = mine.remove(r.nextInt(mine.size()));
                            othersReleased.add(id); // noted before: a release may be in the file before it returns
                            assertThat(other.release(id)).as("the other process's %s was still live", id).isTrue();
                        }
                        LockSupport.parkNanos(200_000 + r.nextInt(800_000));
                    }
                    for (String id : mine) {
                        othersReleased.add(id);
                        other.release(id);
                    }
                } catch (Throwable t) {
                    otherFailed.set(t);
                }
            }, "other-process");
            cli.start();
            try {
                for (int round = 0; round < 4; round++) {
                    Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java")
                            .toString(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
                            System.getProperty("java.class.path"), YarnBooksChild.class.getName(), state.toString(),
                            Long.toString(rnd.nextLong()), "0", "-")
                            .redirectError(ProcessBuilder.Redirect.DISCARD).start();
                    int target = 3 + rnd.nextInt(30);
                    int seen = 0;
                    try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(),
                            StandardCharsets.UTF_8))) {
                        for (String line; seen < target && (line = out.readLine()) != null;) {
                            if (ack(line, acked)) {
                                seen++;
                            }
                        }
                        LockSupport.parkNanos(rnd.nextInt(3_000_000)); // somewhere in the next call
                        child.toHandle().destroyForcibly();
                        assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
                        for (String line; (line = out.readLine()) != null;) {
                            ack(line, acked);
                        }
                    }
                    assertThat(seen).as("round %d: grants before the kill", round).isEqualTo(target);
                }
            } finally {
                stop.set(true);
                cli.join(30_000);
            }
            assertThat(otherFailed.get()).as("the other process").isNull();
            assertThat(othersMade).as("the other process got GPUs meanwhile").isNotEmpty();
        }
        Map<String, Integer> indexOfUuid = new HashMap<>();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            for (GpuDevice d : inv.devices()) {
                indexOfUuid.put(d.uuid(), d.index());
            }
        }
        LedgerWalk w = LedgerWalk.of(state); // no GPU granted twice, checked line by line
        Map<String, Set<Integer>> byContainer = new HashMap<>();
        w.container.forEach((id, cid) -> {
            Set<Integer> idx = new TreeSet<>();
            w.granted.get(id).forEach(u -> idx.add(indexOfUuid.get(u)));
            byContainer.put(cid, idx);
        });
        for (Map.Entry<String, Set<Integer>> e : acked.entrySet()) {
            assertThat(byContainer).as("acknowledged grant of %s in the ledger", e.getKey()).containsKey(e.getKey());
            assertThat(byContainer.get(e.getKey())).as("GPUs of %s", e.getKey()).isEqualTo(e.getValue());
        }
        for (String id : w.ended) {
            if (othersMade.contains(id)) {
                assertThat(othersReleased).as("the other process's %s ended: only it may end it", id).contains(id);
            }
        }
        assertThat(w.holder.values()).as("the other process holds nothing at the end")
                .noneMatch(othersMade::contains);
    }

    private static boolean ack(String line, Map<String, Set<Integer>> acked) {
        if (!line.startsWith("ACK ")) {
            return false;
        }
        String[] f = line.split(" ");
        Set<Integer> minors = new TreeSet<>();
        for (String m : f[2].split(",")) {
            minors.add(Integer.parseInt(m));
        }
        acked.put(f[1], minors);
        return true;
    }
}
