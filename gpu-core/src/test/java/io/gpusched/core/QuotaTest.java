package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Per-user quotas ({@code gpu.users}) and admin drains: the limit rules, the refusal's words, and that the limit holds
 * across threads, schedulers and processes on one node ledger, judged from the ledger's file by the independent
 * {@link LedgerReader}.
 */
class QuotaTest {

    @Test
    void aUsersLimitIsTheirOwnElseTheLargestOfTheirGroupsElseMaxGpus() {
        UserQuotas q = new UserQuotas(4, Map.of("alice", 8, "carol", 0), Map.of("students", 2, "staff", 6,
                "unlimited", 0));
        assertThat(q.limitFor("alice", List.of("students"))).isEqualTo(new UserQuotas.Limit(8,
                "gpu.users.per_user.alice"));
        assertThat(q.limitFor("carol", List.of("students")).limited()).as("0 per user: no limit").isFalse();
        assertThat(q.limitFor("bob", List.of("students", "staff")).gpus()).isEqualTo(6);
        assertThat(q.limitFor("bob", List.of("students", "staff")).source()).contains("per_group.staff");
        assertThat(q.limitFor("bob", List.of("students")).gpus()).isEqualTo(2);
        assertThat(q.limitFor("bob", List.of("students", "unlimited")).limited()).isFalse();
        assertThat(q.limitFor("dave", List.of("nobody"))).isEqualTo(new UserQuotas.Limit(4, "gpu.users.max_gpus"));
        assertThat(UserQuotas.none().any()).isFalse();
    }

    @Test
    void theYamlFormIsParsedAndBadValuesAreRefusedByPath() {
        GpuConfig c = GpuConfig.parse("""
                gpu:
                  users: {max_gpus: 4, per_user: {alice: 8}, per_group: {students: 2}}
                  service:
                    admin_group: gpuadmin
                    socket_group: gpu
                    login_cgroups: [/sys/fs/cgroup/user.slice]
                    job_cgroup_parent: /sys/fs/cgroup/gpusched.jobs
                    kill_grace: 3s
                    job_group: gpujobs
                    private_dir: /var/lib/gpusched-service
                """, "test.yaml");
        assertThat(c.users()).isEqualTo(new UserQuotas(4, Map.of("alice", 8), Map.of("students", 2)));
        assertThat(c.service().adminGroup()).contains("gpuadmin");
        assertThat(c.service().socketGroup()).contains("gpu");
        assertThat(c.service().socket()).isEqualTo(Path.of(ServiceSettings.DEFAULT_SOCKET));
        assertThat(c.service().loginCgroups()).containsExactly(Path.of("/sys/fs/cgroup/user.slice"));
        assertThat(c.service().jobCgroupParent()).contains(Path.of("/sys/fs/cgroup/gpusched.jobs"));
        assertThat(c.service().killGrace()).isEqualTo(Duration.ofSeconds(3));
        assertThat(c.service().jobGroup()).contains("gpujobs");
        assertThat(c.service().privateDir(Path.of("/var/lib/gpusched")))
                .isEqualTo(Path.of("/var/lib/gpusched-service"));
        assertThat(GpuConfig.defaults().service().privateDir(Path.of("/s"))).as("unset: the state directory")
                .isEqualTo(Path.of("/s"));
        assertThat(GpuConfig.defaults().service().jobGroup()).isEmpty();
        assertThat(GpuConfig.defaults().service()).isEqualTo(ServiceSettings.defaults());
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {users: {max_gpus: -1}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageStartingWith("x.yaml: gpu.users.max_gpus");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {users: {per_user: {alice: }}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.users.per_user.alice: is required");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {users: {per_group: {'a b': 2}}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("not a user or group name");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {users: {quota: 2}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.users.quota: unknown key");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {service: {login_cgroups: [user.slice]}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageStartingWith("x.yaml: gpu.service.login_cgroups[0]")
                .hasMessageContaining("not an absolute");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {service: {socket: run/s.sock}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.service.socket");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {service: {kill_grace: 2h}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.service.kill_grace");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {service: {admin_group: 'a:b'}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.service.admin_group");
        for (String bad : new String[]{"var/lib/own", "/var/lib/../own", "/"}) {
            assertThatThrownBy(() -> GpuConfig.parse("gpu: {service: {private_dir: '" + bad + "'}}", "x.yaml"))
                    .as(bad).isInstanceOf(GpuConfigException.class)
                    .hasMessageContaining("gpu.service.private_dir").hasMessageContaining("absolute, normalized");
        }
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {service: {job_group: 'a b'}}", "x.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.service.job_group");
    }

    @Test
    void groupLimitsComeFromTheResolverAndUidsMatchWhateverTheName() {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of(), Map.of("students", 2))).build();
        List<String> asked = new ArrayList<>();
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).config(config)
                .groups(user -> {
                    asked.add(user);
                    return user.equals("stu") ? List.of("stu", "students") : List.of();
                }).build()) {
            s.allocate(GpuRequest.builder().owner("stu").ownerUid(2001).count(2).build());
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().owner("stu").ownerUid(2001).build()))
                    .isInstanceOf(GpuAllocationException.class)
                    .satisfies(e -> assertThat(((GpuAllocationException) e).reason()).isEqualTo(Reason.QUOTA_EXCEEDED))
                    .hasMessageContaining("gpu.users.per_group.students");
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().owner("stu").count(3).build()))
                    .as("more than the limit in one request can never be served").isInstanceOf(
                            GpuAllocationException.class)
                    .satisfies(e -> assertThat(((GpuAllocationException) e).reason()).isEqualTo(Reason.INVALID_REQUEST))
                    .hasMessageContaining("at most 2");
            // another name with the same uid is the same user; the same name with another uid is not
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().owner("stu").ownerUid(2001).build()))
                    .isInstanceOf(GpuAllocationException.class);
            s.allocate(GpuRequest.builder().owner("other").ownerUid(2002).count(4).build());
            assertThat(asked).contains("stu");
        }
    }

    @Test
    void aWaiterOverItsQuotaDoesNotHoldTheNodesQueueAndIsServedOnItsOwnRelease(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = QuotaChild.scheduler(dir)) {
            List<Allocation> held = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                held.add(s.allocate(QuotaChild.alice()));
            }
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<Allocation> waiting = ex.submit(() -> s.allocate(QuotaChild.alice(), Duration.ofMinutes(1)));
                Thread.sleep(300); // the waiter has tried and been refused at least once by now (or not: either way)
                Allocation bob = s.allocate(GpuRequest.builder().owner("bob").ownerUid(1002).count(2).build());
                assertThat(bob.devices()).hasSize(2);
                assertThat(waiting.isDone()).isFalse();
                s.release(held.get(0).id());
                Allocation served = waiting.get(1, TimeUnit.MINUTES);
                assertThat(served.owner()).contains("alice");
            } finally {
                ex.shutdownNow();
            }
        }
        LedgerReader r = LedgerReader.read(dir);
        assertThat(r.peakGpusByOwner.get("uid:1001")).isEqualTo(3);
        assertThat(r.doubleGrants).isEmpty();
    }

    /**
     * Two schedulers of this JVM (four threads each) and two child JVMs allocate one GPU at a time for alice (limit 3)
     * and release at random on one ledger; the ledger's history, read without gpusched's code, never shows alice with
     * more than three GPUs, and the limit did refuse.
     */
    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES)
    void noInterleavingOfThreadsOrProcessesExceedsTheLimit(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler first = QuotaChild.scheduler(dir); GpuScheduler second = QuotaChild.scheduler(dir)) {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            List<Process> children = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                children.add(new ProcessBuilder(java, "-XX:TieredStopAtLevel=1", "-cp",
                        System.getProperty("java.class.path"), QuotaChild.class.getName(), dir.toString(),
                        String.valueOf(i), "300", tmp.resolve("c" + i + ".log").toString()).redirectErrorStream(true)
                        .redirectOutput(tmp.resolve("c" + i + ".out").toFile()).start());
            }
            AtomicInteger refused = new AtomicInteger();
            ExecutorService ex = Executors.newFixedThreadPool(8);
            List<Future<Void>> done = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                GpuScheduler s = t % 2 == 0 ? first : second;
                int seed = t;
                done.add(ex.submit((Callable<Void>) () -> {
                    Random rnd = new Random(seed);
                    List<String> mine = new ArrayList<>();
                    for (int i = 0; i < 200; i++) {
                        if (!mine.isEmpty() && rnd.nextInt(3) == 0) {
                            s.release(mine.remove(0));
                            continue;
                        }
                        try {
                            mine.add(s.allocate(QuotaChild.alice()).id());
                        } catch (GpuAllocationException e) {
                            assertThat(e.reason()).isIn(Reason.QUOTA_EXCEEDED, Reason.INSUFFICIENT_GPUS);
                            if (e.reason() == Reason.QUOTA_EXCEEDED) {
                                refused.incrementAndGet();
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<Void> f : done) {
                f.get(4, TimeUnit.MINUTES);
            }
            ex.shutdown();
            for (int i = 0; i < children.size(); i++) {
                assertThat(children.get(i).waitFor(4, TimeUnit.MINUTES)).isTrue();
                assertThat(children.get(i).exitValue()).as(Files.readString(tmp.resolve("c" + i + ".out"))
                        + Files.readString(tmp.resolve("c" + i + ".log"))).isZero();
                assertThat(Files.readAllLines(tmp.resolve("c" + i + ".log"))).contains("DONE");
            }
            assertThat(refused.get()).as("the limit refused some requests").isPositive();
        }
        LedgerReader r = LedgerReader.read(dir);
        assertThat(r.peakGpusByOwner).containsEntry("uid:1001", 3);
        assertThat(r.doubleGrants).isEmpty();
    }

    @Test
    void aDrainIsSeenByEveryProcessAndAHeldGpuStaysOutAfterItsRelease(@TempDir Path tmp) {
        Path dir = tmp.resolve("state");
        try (GpuScheduler admin = QuotaChild.scheduler(dir); GpuScheduler other = QuotaChild.scheduler(dir)) {
            Allocation held = other.allocate(GpuRequest.builder().deviceIndices(List.of(3)).build());
            assertThat(admin.drain(2, "drained by root: fan")).isTrue();
            assertThat(admin.drain(2, "again")).isFalse();
            assertThat(admin.drain(3, "drained by root: reseat")).isTrue();
            assertThat(other.devices().get(2).pool()).isEqualTo(DeviceState.Pool.CORDONED);
            assertThat(other.devices().get(2).poolReason()).contains("drained by root: fan");
            assertThatThrownBy(() -> other.allocate(GpuRequest.builder().deviceIndices(List.of(2)).build()))
                    .isInstanceOf(GpuAllocationException.class).hasMessageContaining("drained by an admin")
                    .hasMessageContaining("fan");
            assertThatThrownBy(() -> other.allocate(GpuRequest.builder().count(7).build()))
                    .isInstanceOf(GpuAllocationException.class).hasMessageContaining("2 drained by an admin");
            assertThat(other.allocation(held.id())).as("a drain leaves a held GPU with its holder").isPresent();
            other.release(held.id());
            assertThat(admin.devices().get(3).pool()).isEqualTo(DeviceState.Pool.CORDONED);
            assertThat(other.undrain(2)).isTrue();
            assertThat(other.undrain(2)).isFalse();
            assertThat(admin.allocate(GpuRequest.builder().deviceIndices(List.of(2)).build()).deviceIndices())
                    .containsExactly(2);
            assertThatThrownBy(() -> admin.drain(99, "x")).isInstanceOf(GpuAllocationException.class)
                    .satisfies(e -> assertThat(((GpuAllocationException) e).reason()).isEqualTo(Reason.UNKNOWN_DEVICE));
        }
        try (GpuScheduler restarted = QuotaChild.scheduler(dir)) {
            assertThat(restarted.devices().get(3).pool()).as("the drain survives a restart")
                    .isEqualTo(DeviceState.Pool.CORDONED);
        }
    }
}
