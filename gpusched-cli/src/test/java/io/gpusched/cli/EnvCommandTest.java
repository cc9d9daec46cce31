package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.GpuNode;
import io.gpusched.yarn.YarnContainerGpus;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched env}: a YARN container's GPUs read back from the node ledger, where the NodeManager's plugin records
 * them as an allocation labelled {@value YarnContainerGpus#LABEL} = container id (written here with that contract by
 * another "process" of the node: a second scheduler on the same state directory).
 */
class EnvCommandTest {
    static final String CID = "container_1700000000000_0001_01_000002";

    @TempDir
    Path state;

    private Allocation record(String containerId, Integer... gpus) {
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(state)
                .maintenanceInterval(Duration.ZERO).build()) {
            return node.scheduler().allocate(GpuRequest.builder().deviceIndices(gpus).owner("yarn").jobId(containerId)
                    .label(YarnContainerGpus.LABEL, containerId).build());
        }
    }

    @Test
    void printsTheContainersGpusAsExportLinesAShellEvaluates() throws Exception {
        Allocation a = record(CID, 3, 5);
        record("container_1700000000000_0001_01_000003", 0, 1);
        CliRunner.Result r = new CliRunner(state).run("--simulate", "dgx1-v100", "env", "--container", CID);
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("export CUDA_VISIBLE_DEVICES='" + String.join(",", a.deviceUuids()) + "'");
        assertThat(r.out()).contains("GPUs [3, 5]");

        Path sh = Path.of("/bin/sh");
        Assumptions.assumeTrue(Files.isExecutable(sh), "no /bin/sh to evaluate the lines with");
        Path script = state.resolve("env.sh");
        Files.writeString(script, r.out(), StandardCharsets.UTF_8);
        Process p = new ProcessBuilder(sh.toString(), "-c", ". " + script + " && printf '%s' \"$CUDA_VISIBLE_DEVICES\"")
                .redirectErrorStream(true).start();
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        String seen = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.exitValue()).as(seen).isZero();
        assertThat(List.of(seen.split(","))).isEqualTo(a.deviceUuids());
    }

    @Test
    void jsonNamesTheContainerItsGpusAndTheEnvironment() {
        record(CID, 6, 7);
        CliRunner.Result r = new CliRunner(state).run("--simulate", "dgx1-v100", "--json", "env", "--container", CID);
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("\"container\":\"" + CID + "\"").contains("\"gpus\":[6,7]")
                .contains("CUDA_VISIBLE_DEVICES");
    }

    @Test
    void aContainerWithoutGpusAndABadIdAreRefusedWithTheReason() {
        record(CID, 2);
        CliRunner.Result none = new CliRunner(state).run("--simulate", "dgx1-v100", "env", "--container",
                "container_1700000000000_0001_01_000009");
        assertThat(none.exit()).isEqualTo(3);
        assertThat(none.err()).contains("container_1700000000000_0001_01_000009").contains("no GPUs")
                .contains(state.toString());
        CliRunner.Result bad = new CliRunner(state).run("--simulate", "dgx1-v100", "env", "--container", "42");
        assertThat(bad.exit()).isEqualTo(2);
        assertThat(bad.err()).contains("\"42\" is not a YARN container id").contains("container_");
    }

    @Test
    void envOnlyReadsTheLedgerAndAMissingOneIsOneLineNamingIt() throws Exception {
        record(CID, 1);
        Files.delete(state.resolve("ledger.lock")); // a reader takes no lock: it neither needs nor creates the file
        byte[] before = Files.readAllBytes(state.resolve("ledger"));
        CliRunner.Result r = new CliRunner(state).run("--simulate", "dgx1-v100", "env", "--container", CID);
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(Files.exists(state.resolve("ledger.lock"))).as("env created the lock file").isFalse();
        assertThat(Files.readAllBytes(state.resolve("ledger"))).isEqualTo(before);

        Path empty = Files.createDirectory(state.resolve("empty"));
        CliRunner.Result none = new CliRunner(empty).run("--simulate", "dgx1-v100", "env", "--container", CID);
        assertThat(none.exit()).as("the ledger cannot be read: the code YarnContainerGpus exits with").isEqualTo(4);
        assertThat(none.err().lines().filter(l -> !l.isBlank()).toList()).singleElement().asString()
                .startsWith("gpusched: UNREADABLE: ").contains(empty.resolve("ledger").toString());
        assertThat(empty).as("a reader creates nothing").isEmptyDirectory();
    }

    @Test
    void withoutContainerIdTheDefaultIsTheEnvironmentsAndItsAbsenceIsSaid() {
        Assumptions.assumeTrue(System.getenv("CONTAINER_ID") == null, "this JVM runs inside a YARN container");
        CliRunner.Result r = new CliRunner(state).run("--simulate", "dgx1-v100", "env");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--container").contains("CONTAINER_ID");
    }
}
