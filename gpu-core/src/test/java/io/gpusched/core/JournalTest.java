package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JournalTest {

    static GpuScheduler open(Path journal) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).journal(journal)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void allocationsSurviveARestartAndIdsStayUnique(@TempDir Path dir) {
        Path j = dir.resolve("state/journal.jsonl");
        String keep;
        String gone;
        try (GpuScheduler s = open(j)) {
            keep = s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=alice", "--label=k=v")).id();
            gone = s.allocate(GpuRequests.fromCliFlags("--shared=4GB", "--job=j1")).id();
            s.allocate(GpuRequest.builder().maxDuration(Duration.ofHours(1)).build());
            s.release(gone);
        }
        try (GpuScheduler s = open(j)) {
            assertThat(s.allocations()).hasSize(2);
            Allocation a = s.allocation(keep).orElseThrow();
            assertThat(a.owner()).contains("alice");
            assertThat(a.request().labels()).containsEntry("k", "v");
            assertThat(s.allocations().get(1).expiresAt()).isPresent();
            assertThat(s.devices().stream().filter(d -> d.exclusiveHolder().isPresent())).hasSize(3);
            assertThat(s.release(gone)).as("released before the restart: still known").isFalse();
            Allocation next = s.allocate(GpuRequest.builder().build());
            assertThat(next.id()).isNotIn(keep, gone);
            assertThat(Journal.sequenceOf(next.id())).isEqualTo(4);
            assertThat(s.recoveryProblems()).isEmpty();
        }
    }

    @Test
    void aTruncatedLastLineIsRecoveredFromWithAWarning(@TempDir Path dir) throws Exception {
        Path j = dir.resolve("journal.jsonl");
        String id;
        try (GpuScheduler s = open(j)) {
            id = s.allocate(GpuRequest.builder().build()).id();
        }
        Files.writeString(j, "{\"op\":\"A\",\"id\":\"x-9\",\"devi", StandardOpenOption.APPEND);
        try (GpuScheduler s = open(j)) {
            assertThat(s.allocation(id)).isPresent();
            assertThat(s.allocations()).hasSize(1);
            assertThat(s.recoveryProblems()).singleElement().asString().contains("(last) is corrupt");
        }
        assertThat(Files.readAllLines(j)).as("compacted").hasSize(2);
    }

    @Test
    void aDeviceThatIsGoneIsReportedOrRefusedWhenStrict(@TempDir Path dir) throws Exception {
        Path j = dir.resolve("journal.jsonl");
        try (GpuScheduler s = open(j)) {
            s.allocate(GpuRequest.builder().build());
        }
        String text = Files.readString(j);
        String uuid = GpuInventories.simulated("dgx-h100").devices().get(0).uuid();
        Files.writeString(j, text.replace(uuid, "GPU-00000000-dead-beef-0000-000000000000"));
        try (GpuScheduler s = open(j)) {
            assertThat(s.recoveryProblems()).singleElement().asString().contains("no longer has");
            assertThat(s.status().notes()).anySatisfy(n -> assertThat(n).contains("GPU-00000000-dead-beef"));
        }
        Files.writeString(j, text.replace(uuid, "GPU-00000000-dead-beef-0000-000000000000"));
        assertThatThrownBy(() -> GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).journal(j)
                .strictRecovery(true).build()).hasMessageContaining("refusing to start (strict recovery)");
    }

    /** A child JVM is killed with SIGKILL at random moments; every acknowledged allocation must come back. */
    @Test
    void survivesSigkillAtRandomMoments(@TempDir Path dir) throws Exception {
        Path j = dir.resolve("journal.jsonl");
        Random rnd = new Random(7);
        Set<String> acknowledged = new HashSet<>();
        Set<String> released = new HashSet<>();
        Set<String> releasing = new HashSet<>();
        int kills = 0;
        for (int round = 0; round < 24; round++) {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            Path log = dir.resolve("child-" + round + ".log");
            Files.writeString(log, "");
            Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                    JournalCrashChild.class.getName(), j.toString(), String.valueOf(round), log.toString())
                    .redirectErrorStream(true).redirectOutput(dir.resolve("child-" + round + ".out").toFile()).start();
            for (int i = 0; i < 3000 && !Files.readString(log).startsWith("READY"); i++) {
                Thread.sleep(10);
            }
            assertThat(Files.readString(log)).as("child started").startsWith("READY");
            Thread.sleep(20 + rnd.nextInt(200));
            p.destroyForcibly();
            assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
            kills++;
            for (String line : Files.readAllLines(log)) {
                record(line, acknowledged, released, releasing);
            }
            try (GpuScheduler s = open(j)) {
                Set<String> live = new HashSet<>();
                s.allocations().forEach(a -> live.add(a.id()));
                for (String id : acknowledged) {
                    if (!releasing.contains(id)) {
                        assertThat(live).as("round %d: acknowledged %s is present", round, id).contains(id);
                    }
                }
                for (String id : released) {
                    assertThat(live).as("round %d: released %s did not come back", round, id).doesNotContain(id);
                }
                acknowledged.retainAll(live);
                releasing.clear();
                acknowledged.addAll(live);
            }
        }
        assertThat(kills).isGreaterThanOrEqualTo(20);
        assertThat(released).as("the children did real work").hasSizeGreaterThan(20);
    }

    private static void record(String line, Set<String> ack, Set<String> released, Set<String> releasing) {
        String[] f = line.split(" ");
        if (f.length != 2) {
            return;
        }
        switch (f[0]) {
            case "A" -> ack.add(f[1]);
            case "r" -> releasing.add(f[1]);
            case "R" -> {
                released.add(f[1]);
                ack.remove(f[1]);
                releasing.remove(f[1]);
            }
            default -> { }
        }
    }

}
