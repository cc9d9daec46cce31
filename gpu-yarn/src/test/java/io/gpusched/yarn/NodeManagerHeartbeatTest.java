package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.GpuNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32, item 3: the NodeManager's heartbeat, and the records of YARN containers that outlive YARN: flagged once no
 * NodeManager has run for the configured time, never while one runs, and hostile heartbeat files (links, FIFOs, huge
 * or malformed ones) are not believed, never followed and never block.
 */
class NodeManagerHeartbeatTest {
    @TempDir
    Path dir;

    private static String heartbeat(long pid, long start, Instant at, long afterMs) {
        return "pid=" + pid + "\nstart=" + start + "\nhost=node7\nat=" + at.toEpochMilli() + "\nevery_ms=5000\n"
                + "outlived_after_ms=" + afterMs + "\n";
    }

    @Test
    void theHeartbeatNamesThisProcessAndIsRewrittenAtomically() throws Exception {
        NodeManagerHeartbeat.write(dir, Duration.ofSeconds(5), Duration.ofMinutes(3));
        NodeManagerHeartbeat hb = NodeManagerHeartbeat.read(dir).orElseThrow();
        assertThat(hb.pid()).isEqualTo(ProcessHandle.current().pid());
        assertThat(hb.startTime()).isEqualTo(HolderProcess.current().startTime());
        assertThat(hb.running()).isTrue();
        assertThat(hb.every()).isEqualTo(Duration.ofSeconds(5));
        assertThat(hb.outlivedAfter()).isEqualTo(Duration.ofMinutes(3));
        NodeManagerHeartbeat.write(dir, Duration.ofSeconds(5), Duration.ofMinutes(3));
        try (var s = Files.list(dir)) {
            assertThat(s.map(p -> p.getFileName().toString()).toList()).as("no temporary file left")
                    .containsExactly(NodeManagerHeartbeat.FILE);
        }
        assertThat(Files.getPosixFilePermissions(dir.resolve(NodeManagerHeartbeat.FILE)))
                .as("readable by every user (status runs as anyone)").contains(PosixFilePermission.OTHERS_READ)
                .doesNotContain(PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_WRITE);
    }

    @Test
    void aPlantedLinkIsReplacedNotWrittenThroughAndNotBelieved() throws Exception {
        String original = heartbeat(1, 1, Instant.ofEpochMilli(1000), 1);
        Path victim = Files.writeString(dir.resolve("victim"), original);
        Path sub = Files.createDirectories(dir.resolve("state"));
        Files.createSymbolicLink(sub.resolve(NodeManagerHeartbeat.FILE), victim);
        assertThat(NodeManagerHeartbeat.read(sub)).as("a link is not read").isEmpty();
        NodeManagerHeartbeat.write(sub, Duration.ofSeconds(5), Duration.ofMinutes(10));
        assertThat(Files.readString(victim)).as("the link's target").isEqualTo(original);
        assertThat(Files.isSymbolicLink(sub.resolve(NodeManagerHeartbeat.FILE))).isFalse();
        assertThat(NodeManagerHeartbeat.read(sub)).isPresent();
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void fifosHugeAndMalformedFilesAreNotHeartbeats() throws Exception {
        Path fifo = dir.resolve("fifo");
        Files.createDirectories(fifo);
        Process mk = new ProcessBuilder("mkfifo", fifo.resolve(NodeManagerHeartbeat.FILE).toString()).start();
        assertThat(mk.waitFor()).isZero();
        assertThat(NodeManagerHeartbeat.read(fifo)).as("a FIFO is not opened").isEmpty();
        for (String body : List.of("x".repeat(NodeManagerHeartbeat.MAX_BYTES + 1), "pid=abc\n",
                heartbeat(-4, 1, Instant.now(), 1), heartbeat(5, 1, Instant.now(), -1), "\0\0\0",
                heartbeat(5, 1, Instant.now(), 1).replace("outlived_after_ms=1\n", ""))) {
            Path d = Files.createTempDirectory(dir, "hb");
            Files.write(d.resolve(NodeManagerHeartbeat.FILE), body.getBytes(StandardCharsets.UTF_8));
            assertThat(NodeManagerHeartbeat.read(d)).as(body.length() > 80 ? "huge" : body).isEmpty();
        }
        Path d = Files.createTempDirectory(dir, "hb");
        Files.createDirectory(d.resolve(NodeManagerHeartbeat.FILE));
        assertThat(NodeManagerHeartbeat.read(d)).as("a directory").isEmpty();
        assertThat(Files.isDirectory(d.resolve(NodeManagerHeartbeat.FILE), LinkOption.NOFOLLOW_LINKS)).isTrue();
    }

    @Test
    void recordsOfYarnContainersAreFlaggedOnceNoNodeManagerHasRunForTheConfiguredTime() throws Exception {
        Path state = dir.resolve("state");
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuNode node = GpuNode.builder().inventory(inv).stateDir(state).maintenanceInterval(Duration.ZERO)
                     .auditLogging(false).build()) {
            Allocation c1 = node.scheduler().allocate(GpuRequest.builder().count(2).owner("yarn")
                    .jobId("container_1700000000000_0001_01_000002")
                    .label(YarnContainerGpus.LABEL, "container_1700000000000_0001_01_000002").build());
            Allocation c2 = node.scheduler().allocate(GpuRequest.builder().count(2).owner("yarn")
                    .jobId("container_1700000000000_0001_01_000003")
                    .label(YarnContainerGpus.LABEL, "container_1700000000000_0001_01_000003").build());
            Allocation cli = node.scheduler().allocate(GpuRequest.builder().count(2).owner("cli").build());
            List<Allocation> live = node.scheduler().allocations();
            Instant newest = c2.createdAt();

            // no heartbeat (YARN ran a version without one): the newest record says when a NodeManager last ran
            assertThat(NodeManagerHeartbeat.outlived(state, live, newest.plus(Duration.ofMinutes(9)))).isEmpty();
            NodeManagerHeartbeat.Outlived o = NodeManagerHeartbeat.outlived(state, live,
                    newest.plus(Duration.ofMinutes(11))).orElseThrow();
            assertThat(o.ids()).containsExactly(c1.id(), c2.id()).doesNotContain(cli.id());
            assertThat(o.heartbeat()).isEmpty();
            assertThat(o.describe("gpusched --state-dir " + state)).contains("2 allocations of YARN containers")
                    .contains("no NodeManager heartbeat").endsWith("gpusched --state-dir " + state + " release "
                            + c1.id() + " " + c2.id());

            // a NodeManager that is gone (a pid with another start time), last seen an hour after the records,
            // flagged after its own setting (3 minutes)
            Instant seen = newest.plus(Duration.ofHours(1));
            HolderProcess me = HolderProcess.current();
            Files.writeString(state.resolve(NodeManagerHeartbeat.FILE), heartbeat(me.pid(), me.startTime() + 1, seen,
                    Duration.ofMinutes(3).toMillis()));
            assertThat(NodeManagerHeartbeat.read(state).orElseThrow().running()).isFalse();
            assertThat(NodeManagerHeartbeat.outlived(state, live, seen.plus(Duration.ofMinutes(2)))).isEmpty();
            o = NodeManagerHeartbeat.outlived(state, live, seen.plus(Duration.ofMinutes(4))).orElseThrow();
            assertThat(o.lastSeen()).isEqualTo(Instant.ofEpochMilli(seen.toEpochMilli()));
            assertThat(o.after()).isEqualTo(Duration.ofMinutes(3));
            assertThat(o.describe("gpusched")).contains("pid " + me.pid() + " on node7");

            // a NodeManager that runs now is never flagged, however old its heartbeat
            Files.writeString(state.resolve(NodeManagerHeartbeat.FILE), heartbeat(me.pid(), me.startTime(), seen,
                    0));
            assertThat(NodeManagerHeartbeat.outlived(state, live, seen.plus(Duration.ofDays(30)))).isEmpty();

            // without records of YARN containers there is nothing to flag
            assertThat(NodeManagerHeartbeat.outlived(state, List.of(cli), newest.plus(Duration.ofDays(30))))
                    .isEmpty();
        }
    }
}
