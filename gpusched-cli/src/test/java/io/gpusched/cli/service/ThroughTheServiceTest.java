package io.gpusched.cli.service;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.OwnThread;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every node command through the node service when one answers on {@code $GPUSCHED_SOCKET} (no {@code --state-dir}):
 * the command's own code, in this JVM, against {@link ServiceStandIn} (the real console's handlers over a real
 * simulated scheduler, behind a Unix socket). What the service holds is checked from its ledger file with
 * gpusched-testing's independent {@link LedgerReader}, not through the command.
 */
@Timeout(120)
class ThroughTheServiceTest {
    private static final ObjectMapper M = new ObjectMapper();

    @TempDir
    Path dir;
    ServiceStandIn service;

    record Result(int exit, String out, String err) {
    }

    @BeforeEach
    void setUp() throws Exception {
        service = new ServiceStandIn(dir, "dgx1-v100");
    }

    @AfterEach
    void tearDown() throws Exception {
        service.close();
    }

    private Result gpusched(String... args) {
        return gpusched(new ByteArrayOutputStream(), args);
    }

    private Result gpusched(ByteArrayOutputStream out, String... args) {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.put("GPUSCHED_SOCKET", service.path().toString());
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private LedgerReader ledger() throws Exception {
        return LedgerReader.read(dir.resolve("service-state"));
    }

    @Test
    void allocateStatusListRenewAndReleaseAreTheServicesAndItsLedgerSaysSo() throws Exception {
        Result a = gpusched("--json", "allocate", "--gpu=2", "--lease=1h");
        assertThat(a.exit()).as(a.err()).isZero();
        JsonNode alloc = M.readTree(a.out());
        String id = alloc.get("id").asText();
        assertThat(alloc.get("devices")).hasSize(2);
        assertThat(alloc.get("environment").get("CUDA_VISIBLE_DEVICES").asText()).startsWith("GPU-");
        assertThat(alloc.has("holderPid")).isTrue();
        assertThat(ledger().live).containsOnlyKeys(id);
        assertThat(ledger().live.get(id).uuids()).containsExactlyElementsOf(
                M.convertValue(alloc.get("uuids"), List.class));

        Result status = gpusched("--json", "status");
        JsonNode st = M.readTree(status.out());
        assertThat(st.get("backend").asText()).isEqualTo("simulated:dgx1-v100");
        JsonNode held = st.get("allocations").get(0);
        assertThat(held.get("id").asText()).isEqualTo(id);
        assertThat(held.get("devices")).isEqualTo(held.get("deviceIndices")).isEqualTo(alloc.get("devices"));
        assertThat(held.get("uuids")).isEqualTo(held.get("deviceUuids"));
        assertThat(held.get("expired").asBoolean()).isFalse();
        int gpu = alloc.get("devices").get(0).asInt();
        assertThat(st.get("devices").get(gpu).get("heldBy").asText()).isEqualTo(id);
        assertThat(st.get("devices").get(gpu).get("holders").get(0).get("id").asText()).isEqualTo(id);

        assertThat(gpusched("status").out()).contains("Backend simulated:dgx1-v100").contains(id + "  GPUs ");
        assertThat(gpusched("list").out()).contains("8 GPUs").contains(id);

        Result renew = gpusched("renew", id, "--lease", "3h");
        assertThat(renew.exit()).as(renew.err()).isZero();
        assertThat(renew.out()).startsWith("renewed " + id + ": lease until ");

        Result text = gpusched("allocate", "--gpu=1");
        assertThat(text.out()).startsWith("allocated ").contains("CUDA_VISIBLE_DEVICES=GPU-");
        Result docker = gpusched("allocate", "--gpu=1", "--format", "docker");
        assertThat(docker.exit()).as(docker.err()).isZero();
        assertThat(docker.out()).startsWith("--device=/dev/nvidia").contains("-e CUDA_VISIBLE_DEVICES=GPU-");
        assertThat(ledger().live).hasSize(3);

        assertThat(gpusched("release", id).out()).isEqualTo("released " + id + "\n");
        assertThat(gpusched("release", id).out()).isEqualTo(id + " was already released\n");
        assertThat(ledger().live).hasSize(2).doesNotContainKey(id);
    }

    @Test
    void refusalsAreTheServicesAndLocalOnlyOptionsAreRefusedNotIgnored() {
        Result big = gpusched("allocate", "--gpu=9");
        assertThat(big.exit()).isEqualTo(2);
        assertThat(big.err()).startsWith("gpusched: NODE_TOO_SMALL: ");
        Result strategy = gpusched("allocate", "--gpu=1", "--strategy", "packing");
        assertThat(strategy.exit()).isEqualTo(2);
        assertThat(strategy.err()).contains("--strategy packing applies to a local ledger only")
                .contains(service.path().toString()).contains("--state-dir");
        Result cgroup = gpusched("run", "--cgroup-parent", "/sys/fs/cgroup/x", "--", "true");
        assertThat(cgroup.err()).contains("--cgroup-parent");
        assertThat(service.scheduler.allocations()).isEmpty();
    }

    @Test
    void aSimulateFlagMustNameTheServicesNodeAndStateDirIsALedgerOfOnesOwn() throws Exception {
        Allocation held = service.allocate(GpuRequest.builder().count(1).owner("bob").build());
        Result same = gpusched("--simulate", "dgx1-v100", "status");
        assertThat(same.exit()).as(same.err()).isZero();
        assertThat(same.out()).contains(held.id());
        Result other = gpusched("--simulate", "pcie-4xa10", "status");
        assertThat(other.exit()).isEqualTo(2);
        assertThat(other.err()).contains("--simulate pcie-4xa10").contains("simulated:pcie-4xa10")
                .contains("serves simulated:dgx1-v100").contains(service.path().toString());
        Path own = dir.resolve("mine");
        Result local = gpusched("--simulate", "pcie-4xa10", "--state-dir", own.toString(), "allocate", "--gpu=1");
        assertThat(local.exit()).as(local.err()).isZero();
        assertThat(ledger().live).containsOnlyKeys(held.id());
        assertThat(LedgerReader.read(own).live).hasSize(1);
    }

    @Test
    void aWaitQueuesAtTheServiceUntilGpusAreFree() throws Exception {
        Allocation all = service.allocate(GpuRequest.builder().count(8).owner("bob").build());
        CompletableFuture<Result> waiting = OwnThread.supply(() -> gpusched("--json", "allocate",
                "--gpu=2", "--wait", "1m"));
        Thread.sleep(500);
        assertThat(waiting).isNotDone();
        service.scheduler.release(all.id());
        Result r = waiting.get(60, TimeUnit.SECONDS);
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(ledger().live).containsOnlyKeys(M.readTree(r.out()).get("id").asText());
    }

    @Test
    void envFindsTheContainersGpusAtTheService() {
        Allocation a = service.allocate(GpuRequest.builder().count(2).owner("yarn").label("yarn.container",
                "container_1700000000000_0001_01_000002").build());
        Result r = gpusched("env", "--container", "container_1700000000000_0001_01_000002");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("export CUDA_VISIBLE_DEVICES='" + String.join(",", a.deviceUuids()) + "'");
        Result json = gpusched("--json", "env", "--container", "container_1700000000000_0001_01_000002");
        assertThat(json.out()).contains("\"gpus\":" + a.deviceIndices().toString().replace(" ", ""))
                .contains("\"devices\":").contains("\"allocation\":\"" + a.id() + "\"");
        Result none = gpusched("env", "--container", "container_1700000000000_0001_01_000009");
        assertThat(none.exit()).isEqualTo(3);
        assertThat(none.err()).contains("the node service on " + service.path());
    }

    @Test
    void watchDrawsTheServicesFrames() {
        Result r = gpusched("watch", "--count", "2", "--no-ansi");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out().split("gpusched watch - simulated:dgx1-v100", -1)).hasSize(3);
    }

    @Test
    void anAttachedRunStreamsItsOutputReturnsItsExitCodeAndReleases() throws Exception {
        Result r = gpusched("run", "--gpu=2", "--", "sh", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES; echo oops >&2;"
                + " exit 5");
        assertThat(r.exit()).as(r.err()).isEqualTo(5);
        assertThat(r.out()).containsPattern("CVD=GPU-[0-9a-f-]+,GPU-[0-9a-f-]+");
        assertThat(r.err()).contains("oops").containsPattern("gpusched: \\S+ GPUs \\[\\d, \\d\\]");
        // the stand-in releases when it sees the job's process end: up to 60 s on a loaded machine
        for (int i = 0; i < 600 && !ledger().live.isEmpty(); i++) {
            Thread.sleep(100);
        }
        assertThat(ledger().live).isEmpty();
    }

    @Test
    void aDetachedJobItsListItsLogsAndItsCancel() throws Exception {
        Result started = gpusched("--json", "run", "--detach", "--gpu=1", "--", "sh", "-c", "echo hello; sleep 30");
        assertThat(started.exit()).as(started.err()).isZero();
        String job = M.readTree(started.out()).get("id").asText();
        assertThat(gpusched("jobs").out()).contains(job).contains("RUNNING (detached)");
        // the answer comes once the job's process started, not once its shell ran `echo`: a cancel before that
        // would leave no output at all, so wait (up to 60 s) until the job has written its line
        Path output = service.job(job).output;
        for (int i = 0; i < 6000 && !Files.readString(output).contains("hello"); i++) {
            Thread.sleep(10);
        }
        assertThat(gpusched("cancel", job).out()).startsWith("cancelled " + job);
        assertThat(gpusched("logs", job).out()).isEqualTo("hello\n");
        assertThat(gpusched("queue").out()).contains("bob").contains("--gpu=8");
        Result missing = gpusched("cancel", "j-none");
        assertThat(missing.exit()).isEqualTo(2);
        assertThat(missing.err()).startsWith("gpusched: UNKNOWN_JOB: no job j-none");
    }

    @Test
    void aServiceThatDiesMidRunIsOneLineNamingTheJob() throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        CompletableFuture<Result> run = OwnThread.supply(() -> gpusched(out, "run", "--gpu=1", "--",
                "sh", "-c", "echo started; sleep 60"));
        for (int i = 0; i < 1200 && !out.toString(StandardCharsets.UTF_8).contains("started"); i++) {
            Thread.sleep(50); // up to 60 s on a loaded machine
        }
        assertThat(out.toString(StandardCharsets.UTF_8)).as("the job started").contains("started");
        service.socket.close(); // the service is gone: its connections close
        Result r = run.get(60, TimeUnit.SECONDS);
        assertThat(r.exit()).isNotZero();
        assertThat(r.err()).contains("CONNECTION_LOST").containsPattern("before job j-\\S+ ended")
                .contains(service.path().toString());
        assertThat(r.err()).doesNotContain("\tat ");
    }
}
