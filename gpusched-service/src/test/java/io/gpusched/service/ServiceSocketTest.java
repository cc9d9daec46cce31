package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node service as its users meet it: {@code curl --unix-socket} run as real users (useradd, setpriv) against the
 * console with the service's routes on a Unix socket. The caller is the kernel's; what a request claims changes
 * nothing. Judged from the answers and the ledger's file ({@link LedgerReader}).
 */
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class ServiceSocketTest {
    static final ObjectMapper JSON = new ObjectMapper();

    static void needCurl() throws Exception {
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "skipped: needs curl");
    }

    @Test
    void usersAreWhoTheKernelSaysAndActOnlyOnTheirOwnAllocations(@TempDir Path tmp) throws Exception {
        needCurl();
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.defaults()).jobs()) {
            String admins = bed.accounts.group("gpuadm");
            GpuConfig config = GpuConfig.builder().service(ServiceSettings.defaults().withAdminGroup(admins)
                    .withKillGrace(Duration.ofMillis(500))).build();
            try (ServiceBed b2 = new ServiceBed(tmp.resolve("b2"), config)) {
                Files.createDirectories(b2.dir);
                User alice = bed.accounts.user("alice");
                User bob = bed.accounts.user("bob");
                User carol = bed.accounts.user("carol", admins);
                b2.start();
                b2.serve();
                JsonNode who = JSON.readTree(b2.curl(alice, "http://localhost/api/v1/whoami").body());
                assertThat(who.get("uid").asLong()).isEqualTo(alice.uid());
                assertThat(who.get("user").asText()).isEqualTo(alice.name());
                assertThat(who.get("admin").asBoolean()).isFalse();
                assertThat(JSON.readTree(b2.curl(carol, "http://localhost/api/v1/whoami").body()).get("admin")
                        .asBoolean()).isTrue();

                Answer a = b2.curl(alice, "-X", "POST", "-H", "X-Uid: 0", "--data", "{\"flags\":[\"--gpu=2\"]}",
                        "http://localhost/api/v1/allocations");
                assertThat(a.status()).as(a.body()).isEqualTo(201);
                JsonNode alloc = JSON.readTree(a.body());
                String id = alloc.get("id").asText();
                assertThat(alloc.get("owner").asText()).isEqualTo(alice.name());
                assertThat(alloc.get("ownerUid").asLong()).isEqualTo(alice.uid());

                String ledger = Files.readString(b2.state.resolve("ledger"));
                Answer bobs = b2.curl(bob, "-X", "DELETE", "http://localhost/api/v1/allocations/" + id);
                assertThat(bobs.status()).isEqualTo(403);
                JsonNode err = JSON.readTree(bobs.body());
                assertThat(err.get("reason").asText()).isEqualTo("FORBIDDEN");
                assertThat(err.get("holder").asText()).isEqualTo(alice.name());
                assertThat(err.get("mayAct").toString()).contains(alice.name()).contains("root").contains(admins);
                assertThat(b2.curl(bob, "-X", "POST", "--data", "{\"lease\":\"1h\"}", "http://localhost/api/v1/"
                        + "allocations/" + id + "/renew").status()).isEqualTo(403);
                assertThat(b2.curl(bob, "-X", "POST", "--data", "{\"flags\":[\"--owner=" + alice.name() + "\"]}",
                        "http://localhost/api/v1/allocations").status()).isEqualTo(403);
                Answer claim = b2.curl(bob, "-X", "POST", "--data", "{\"flags\":[\"--gpu=1\"],\"uid\":"
                        + alice.uid() + "}", "http://localhost/api/v1/allocations");
                assertThat(claim.status()).isEqualTo(400);
                assertThat(claim.body()).contains("unknown field");
                assertThat(Files.readString(b2.state.resolve("ledger"))).as("bob's requests changed nothing")
                        .isEqualTo(ledger);
                assertThat(b2.curl(bob, "-X", "POST", "--data", "{}", "http://localhost/api/v1/devices/1/drain")
                        .status()).isEqualTo(403);
                assertThat(b2.curl(carol, "-X", "POST", "--data", "{\"reason\":\"fan\"}",
                        "http://localhost/api/v1/devices/1/drain").body()).contains("CORDONED");
                assertThat(b2.curl(carol, "-X", "POST", "http://localhost/api/v1/devices/1/undrain").body())
                        .contains("IN_POOL");
                assertThat(b2.curl(carol, "-X", "POST", "--data", "{\"lease\":\"1h\"}", "http://localhost/api/v1/"
                        + "allocations/" + id + "/renew").status()).isEqualTo(200);
                assertThat(b2.curl(bob, "http://localhost/api/v1/allocations").body()).contains(id);
                Answer released = b2.curl(alice, "-X", "DELETE", "http://localhost/api/v1/allocations/" + id);
                assertThat(released.body()).contains("\"released\":true");
                assertThat(LedgerReader.read(b2.state).live).isEmpty();
                assertThat(Files.readString(b2.state.resolve("audit.log"))).contains("\"uid\":" + bob.uid())
                        .contains("FORBIDDEN");
            }
        }
    }

    @Test
    void jobsOverTheSocketStreamTheirOutputAndRunAsTheirCaller(@TempDir Path tmp) throws Exception {
        needCurl();
        try (ServiceBed bed = new ServiceBed(tmp, ServiceJobsTest.config(List.of())).jobs()) {
            User alice = bed.accounts.user("alice");
            User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sh\",\"-c\",\"id -u; echo err >&2; exit 4\"],"
                    + "\"env\":{\"PATH\":\"/usr/bin:/bin\",\"LD_PRELOAD\":\"/nonexistent.so\"},\"cwd\":\"/\"}";
            Answer run = bed.curl(alice, "-N", "-X", "POST", "--data", body, "http://localhost/api/v1/jobs");
            assertThat(run.status()).as(run.body()).isEqualTo(200);
            StringBuilder out = new StringBuilder();
            StringBuilder errs = new StringBuilder();
            JsonNode exit = null;
            for (String line : run.body().split("\n")) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode e = JSON.readTree(line);
                switch (e.get("type").asText()) {
                    case "stdout" -> out.append(new String(Base64.getDecoder().decode(e.get("data").asText()),
                            StandardCharsets.UTF_8));
                    case "stderr" -> errs.append(new String(Base64.getDecoder().decode(e.get("data").asText()),
                            StandardCharsets.UTF_8));
                    case "exit" -> exit = e;
                    default -> {
                    }
                }
            }
            assertThat(out.toString()).as(run.body()).isEqualTo(alice.uid() + "\n");
            assertThat(errs.toString()).contains("err");
            assertThat(exit).isNotNull();
            assertThat(exit.get("code").asInt()).isEqualTo(4);

            String detached = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sh\",\"-c\",\"echo hello; sleep 600\"],"
                    + "\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"cwd\":\"/\",\"detach\":true}";
            Answer d = bed.curl(alice, "-X", "POST", "--data", detached, "http://localhost/api/v1/jobs");
            assertThat(d.status()).as(d.body()).isEqualTo(201);
            String job = JSON.readTree(d.body()).get("id").asText();
            for (int i = 0; i < 1200 && !bed.curl(alice, "http://localhost/api/v1/jobs/" + job + "/logs").body()
                    .contains("hello"); i++) { // up to 60 s and more: a loaded machine
                Thread.sleep(50);
            }
            assertThat(bed.curl(alice, "http://localhost/api/v1/jobs/" + job + "/logs").body()).contains("hello");
            assertThat(bed.curl(bob, "http://localhost/api/v1/jobs/" + job + "/logs").status()).isEqualTo(403);
            assertThat(bed.curl(bob, "-X", "DELETE", "http://localhost/api/v1/jobs/" + job).status()).isEqualTo(403);
            JsonNode seen = JSON.readTree(bed.curl(bob, "http://localhost/api/v1/jobs/" + job).body());
            assertThat(seen.get("argv").isNull()).as("bob does not see alice's command").isTrue();
            Answer cancel = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + job);
            assertThat(JSON.readTree(cancel.body()).get("state").asText()).isEqualTo("CANCELLED");
            assertThat(LedgerReader.read(bed.state).live).isEmpty();
        }
    }

    /**
     * A client that queues and is killed (SIGKILL, so the kernel closes its socket) is dropped from the queue; a queued
     * attached job whose client is killed is dropped too; nothing is held afterwards.
     */
    @Test
    void aKilledClientsWaitingRequestIsDropped(@TempDir Path tmp) throws Exception {
        needCurl();
        try (ServiceBed bed = new ServiceBed(tmp, ServiceJobsTest.config(List.of())).jobs()) {
            User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            assertThat(bed.curl(null, "-X", "POST", "--data", "{\"flags\":[\"--gpu=8\"]}",
                    "http://localhost/api/v1/allocations").status()).isEqualTo(201);
            List<Process> clients = new ArrayList<>();
            for (String body : List.of("{\"flags\":[\"--gpu=1\"],\"wait\":\"5m\"}")) {
                clients.add(new ProcessBuilder("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(),
                        "--init-groups", "--", "curl", "-sS", "-N", "--unix-socket", bed.socket.toString(), "-X",
                        "POST", "--data", body, "http://localhost/api/v1/allocations").start());
            }
            clients.add(new ProcessBuilder("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(),
                    "--init-groups", "--", "curl", "-sS", "-N", "--unix-socket", bed.socket.toString(), "-X", "POST",
                    "--data", "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/true\"],\"env\":{},\"cwd\":\"/\","
                            + "\"wait\":\"5m\"}",
                    "http://localhost/api/v1/jobs").start());
            for (int i = 0; i < 6000 && bed.service.queue().size() < 2; i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            assertThat(bed.service.queue().size()).isEqualTo(2);
            for (Process p : clients) {
                p.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
            }
            for (int i = 0; i < 6000 && bed.service.queue().size() > 0; i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            assertThat(bed.service.queue().size()).as("both waiting requests were dropped").isZero();
            assertThat(LedgerReader.read(bed.state).live).hasSize(1);
        }
    }
}
