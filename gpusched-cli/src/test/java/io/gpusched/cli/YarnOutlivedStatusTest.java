package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.testing.LedgerReader;
import io.gpusched.yarn.NodeManagerHeartbeat;
import io.gpusched.yarn.YarnContainerGpus;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32, item 3: {@code gpusched status} and {@code doctor} on a node ledger holding allocations of YARN containers
 * whose NodeManager is gone (its heartbeat names a process that no longer runs and was written longer ago than its
 * setting): both flag them with the one command that clears them, and that command, pasted as printed, releases
 * exactly them (checked in the ledger file by gpusched-testing's reader). While the NodeManager runs, or before its
 * setting has passed, nothing is flagged.
 */
class YarnOutlivedStatusTest {
    @TempDir
    Path dir;

    private static String heartbeat(long pid, long start, Instant at, long afterMs) {
        return "pid=" + pid + "\nstart=" + start + "\nhost=node7\nat=" + at.toEpochMilli() + "\nevery_ms=5000\n"
                + "outlived_after_ms=" + afterMs + "\n";
    }

    private static CliRunner.Result exec(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(args);
        return new CliRunner.Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void statusAndDoctorFlagYarnsAllocationsOnceItsNodeManagerIsGoneAndThePrintedCommandClearsThem()
            throws Exception {
        Path state = dir.resolve("state");
        CliRunner cli = new CliRunner(state);
        String c1;
        String c2;
        String other;
        // the records were made two hours ago (a NodeManager ran then)
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler node = GpuScheduler.builder().inventory(inv).stateDir(state).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).clock(Clock.offset(Clock.systemUTC(),
                             Duration.ofHours(-2)))
                     .build()) {
            c1 = yarnRecord(node, "container_1700000000000_0001_01_000002").id();
            c2 = yarnRecord(node, "container_1700000000000_0001_01_000003").id();
            other = node.allocate(GpuRequest.builder().count(1).owner("alice").build()).id();
        }
        HolderProcess me = HolderProcess.current();
        Path hb = state.resolve(NodeManagerHeartbeat.FILE);

        // the NodeManager runs (this process, by pid and start time): nothing flagged, however old the heartbeat
        Files.writeString(hb, heartbeat(me.pid(), me.startTime(), Instant.now().minus(Duration.ofDays(2)), 60_000));
        assertThat(cli.run("--simulate", "dgx1-v100", "status").out()).doesNotContain("outlive")
                .doesNotContain("no NodeManager has run");
        assertThat(cli.run("--simulate", "dgx1-v100", "doctor").out()).contains("[ok]  NodeManager pid " + me.pid());

        // gone (same pid, another start time) one minute ago, flagged after 10: not yet
        Files.writeString(hb, heartbeat(me.pid(), me.startTime() + 7, Instant.now().minus(Duration.ofMinutes(1)),
                600_000));
        assertThat(cli.run("--simulate", "dgx1-v100", "status").out()).doesNotContain("no NodeManager has run");

        // gone for an hour
        Files.writeString(hb, heartbeat(me.pid(), me.startTime() + 7, Instant.now().minus(Duration.ofHours(1)),
                600_000));
        CliRunner.Result st = cli.run("--simulate", "dgx1-v100", "status");
        assertThat(st.exit()).as(st.err()).isZero();
        assertThat(st.out()).contains("note: 2 allocations of YARN containers (" + c1 + ", " + c2 + ") held while no"
                + " NodeManager has run since").contains("pid " + me.pid() + " on node7").doesNotContain(other + ",");
        CliRunner.Result doc = cli.run("--simulate", "dgx1-v100", "doctor");
        assertThat(doc.out()).contains("YARN (node ledger " + state + "): 2 allocations of YARN containers")
                .contains("[--]  no NodeManager runs").contains("[--]  2 allocations of YARN containers");
        Matcher m = Pattern.compile("release them with: (gpusched .*)$", Pattern.MULTILINE).matcher(st.out());
        assertThat(m.find()).as(st.out()).isTrue();
        String command = m.group(1).strip();
        assertThat(command).isEqualTo("gpusched --simulate dgx1-v100 --state-dir " + state + " release " + c1 + " "
                + c2);
        Matcher d = Pattern.compile("release them with: (gpusched .*)$", Pattern.MULTILINE).matcher(doc.out());
        assertThat(d.find()).isTrue();
        assertThat(d.group(1).strip()).as("doctor prints the same command").isEqualTo(command);

        CliRunner.Result cleared = exec(command.substring("gpusched ".length()).split(" "));
        assertThat(cleared.exit()).as(cleared.err()).isZero();
        assertThat(cleared.out()).contains("released 2 of 2");
        LedgerReader file = LedgerReader.read(state);
        assertThat(file.live).containsOnlyKeys(other);
        assertThat(file.ended).extracting(LedgerReader.Ended::id).containsExactlyInAnyOrder(c1, c2);
        assertThat(cli.run("--simulate", "dgx1-v100", "status").out()).doesNotContain("no NodeManager has run");
        // pasted twice: nothing more is released, and it says so
        CliRunner.Result again = exec(command.substring("gpusched ".length()).split(" "));
        assertThat(again.out()).contains("released 0 of 2").contains("already released");
        assertThat(LedgerReader.read(state).ended).hasSize(2);
        // one id the node never issued: nothing is released, the error names it
        CliRunner.Result bad = cli.run("--simulate", "dgx1-v100", "release", other, "a0-999999");
        assertThat(bad.exit()).isNotZero();
        assertThat(bad.err()).contains("a0-999999");
        assertThat(LedgerReader.read(state).live).containsOnlyKeys(other);
        assertThat(List.of(c1, c2)).doesNotContain(other);
    }

    private static Allocation yarnRecord(GpuScheduler node, String cid) {
        return node.allocate(GpuRequest.builder().count(2).owner("yarn").jobId(cid)
                .label(YarnContainerGpus.LABEL, cid).build());
    }
}
