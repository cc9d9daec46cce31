package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.Allocation;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Who may do what, quotas, the fair queue and the audit, through {@link NodeService} with callers made by hand (as
 * the transport makes them from peer credentials). What was granted is judged from the ledger's file by the
 * independent {@link LedgerReader}.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class NodeServiceTest {
    static final Caller ALICE = ServiceBed.caller("alice", 5001, false, "alice", "students");
    static final Caller BOB = ServiceBed.caller("bob", 5002, false, "bob");
    static final Caller CAROL = ServiceBed.caller("carol", 5003, true, "carol", "gpuadmin");
    static final BooleanSupplierNever NEVER = new BooleanSupplierNever();

    /** A client that never goes. */
    static final class BooleanSupplierNever implements java.util.function.BooleanSupplier {
        @Override
        public boolean getAsBoolean() {
            return false;
        }
    }

    static GpuConfig config(UserQuotas q) {
        return GpuConfig.builder().users(q).service(ServiceSettings.defaults().withAdminGroup("gpuadmin")).build();
    }

    private static Allocation one(NodeService s, Caller c, String... flags) throws InterruptedException {
        return s.allocate(c, GpuRequests.fromCliFlags(flags), Optional.empty(), NEVER);
    }

    /**
     * {@code release} checks its caller against the allocation the service granted, without catching up with the node
     * ledger first: the check stays exact when another process of the node has ended that allocation and the service
     * has not caught up (an id's owner never changes): bob is never let through, alice is told it was not live. An
     * allocation another process made (not granted here) is read from the ledger and checked the same way.
     */
    @Test
    void releaseChecksTheOwnerOfWhatItGrantedAndOfWhatOthersMade(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(UserQuotas.none()))) {
            NodeService s = bed.start();
            Allocation a = one(s, ALICE, "--gpu=1");
            try (GpuScheduler other = GpuScheduler.builder().inventory(bed.inventory).stateDir(bed.state)
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
                Allocation b = other.allocate(GpuRequest.builder().owner("alice").ownerUid(5001).build());
                String before = Files.readString(bed.state.resolve("ledger"));
                assertThatThrownBy(() -> s.release(BOB, b.id())).isInstanceOf(AccessDeniedException.class)
                        .hasMessageContaining("held by alice (uid 5001)");
                assertThatThrownBy(() -> s.release(BOB, a.id())).isInstanceOf(AccessDeniedException.class)
                        .hasMessageContaining("held by alice (uid 5001)");
                assertThat(Files.readString(bed.state.resolve("ledger"))).as("bob's releases changed nothing")
                        .isEqualTo(before);
                assertThat(other.release(a.id())).as("ended by another process").isTrue();
                // bob again, whether or not the service has caught up with that end: refused, or told it was not
                // live; never a release
                boolean bobs;
                try {
                    bobs = s.release(BOB, a.id());
                } catch (AccessDeniedException refused) {
                    bobs = false;
                }
                assertThat(bobs).isFalse();
                assertThat(s.release(ALICE, a.id())).as("was not live").isFalse();
                assertThat(s.release(ALICE, b.id())).isTrue();
            }
            assertThat(LedgerReader.read(bed.state).live).isEmpty();
        }
    }

    @Test
    void ownersActOnTheirOwnAdminsOnAnyAndRefusalsNameTheHolderAndWhoMayAct(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(UserQuotas.none()))) {
            NodeService s = bed.start();
            Allocation a = one(s, ALICE, "--gpu=2");
            assertThat(a.owner()).contains("alice");
            assertThat(a.request().ownerUid()).hasValue(5001);
            String before = Files.readString(bed.state.resolve("ledger"));

            AccessDeniedException e = catchThrowableOfType(() -> s.release(BOB, a.id()),
                    AccessDeniedException.class);
            assertThat(e.holder()).contains("alice");
            assertThat(e.mayAct()).containsExactly("alice", "root", "group gpuadmin");
            assertThat(e.getMessage()).contains("bob (uid 5002) may not release allocation " + a.id())
                    .contains("held by alice (uid 5001)").contains("group gpuadmin");
            assertThatThrownBy(() -> s.renew(BOB, a.id(), Duration.ofHours(1)))
                    .isInstanceOf(AccessDeniedException.class);
            // a request naming another owner changes nothing
            assertThatThrownBy(() -> one(s, BOB, "--gpu=1", "--owner=alice")).isInstanceOf(
                    AccessDeniedException.class).hasMessageContaining("may not allocate for owner \"alice\"");
            assertThat(Files.readString(bed.state.resolve("ledger"))).as("refusals leave no trace in the ledger")
                    .isEqualTo(before);
            // a request may not carry the uid, holder or cgroup the service sets
            assertThatThrownBy(() -> s.allocate(BOB, GpuRequest.builder().ownerUid(5001).build(), Optional.empty(),
                    NEVER)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("owner uid");

            assertThat(s.renew(CAROL, a.id(), Duration.ofHours(2)).expiresAt()).isPresent();
            assertThat(s.renew(ALICE, a.id(), Duration.ofHours(3)).expiresAt()).isPresent();
            assertThat(s.release(ALICE, a.id())).isTrue();
            Allocation b = one(s, BOB, "--gpu=1");
            assertThat(s.release(ServiceBed.root(), b.id())).isTrue();
            assertThat(s.release(BOB, b.id())).as("released before").isFalse();

            assertThatThrownBy(() -> s.drain(ALICE, 3, "mine")).isInstanceOf(AccessDeniedException.class)
                    .hasMessageContaining("only root or a member of group gpuadmin may");
            assertThat(s.drain(CAROL, 3, "fan")).isTrue();
            assertThat(bed.scheduler.devices().get(3).pool()).isEqualTo(DeviceState.Pool.CORDONED);
            assertThat(bed.scheduler.devices().get(3).poolReason()).contains("drained by carol: fan");
            assertThat(s.undrain(CAROL, 3)).isTrue();

            List<String> audit = Files.readAllLines(bed.state.resolve("audit.log"));
            assertThat(audit).anyMatch(l -> l.contains("\"uid\":5002") && l.contains("\"action\":\"release\"")
                    && l.contains("\"result\":\"FORBIDDEN\""));
            assertThat(audit).anyMatch(l -> l.contains("\"uid\":5001") && l.contains("\"action\":\"allocate\"")
                    && l.contains("\"result\":\"ok\"") && l.contains(a.id()));
            assertThat(audit).anyMatch(l -> l.contains("\"uid\":5003") && l.contains("\"action\":\"drain\""));
        }
    }

    @Test
    void anAdminMayAllocateForAnotherUserOfTheNode(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(UserQuotas.none()))) {
            NodeService s = bed.start();
            Allocation a = one(s, ServiceBed.root(), "--gpu=1", "--owner=root");
            assertThat(a.request().ownerUid()).hasValue(0);
            assertThatThrownBy(() -> one(s, CAROL, "--owner=no-such-user-xyz")).isInstanceOf(
                    IllegalArgumentException.class).hasMessageContaining("not a user of this node");
        }
    }

    @Test
    void quotasHoldThroughTheServiceAndGroupsComeFromTheCaller(@TempDir Path tmp) throws Exception {
        UserQuotas q = new UserQuotas(3, Map.of(), Map.of("students", 1));
        try (ServiceBed bed = new ServiceBed(tmp, config(q))) {
            NodeService s = bed.start();
            one(s, ALICE, "--gpu=1");
            GpuAllocationException e = catchThrowableOfType(() -> one(s, ALICE, "--gpu=1"),
                    GpuAllocationException.class);
            assertThat(e.reason()).isEqualTo(Reason.QUOTA_EXCEEDED);
            assertThat(e.getMessage()).contains("gpu.users.per_group.students").contains("holds 1 GPU(s)");
            one(s, BOB, "--gpu=3");
            assertThat(catchThrowableOfType(() -> one(s, BOB, "--gpu=1"), GpuAllocationException.class).reason())
                    .isEqualTo(Reason.QUOTA_EXCEEDED);
            assertThat(Files.readString(bed.state.resolve("audit.log"))).contains("QUOTA_EXCEEDED");
        }
    }

    /**
     * The node is full with alice's allocations; alice queues 20 one-GPU requests, then bob one. Bob is served by the
     * second release at the latest (first come, first served would make him wait for all twenty); within alice's,
     * first come first served; nobody holds more than their quota.
     */
    @Test
    void oneUsersTwentyQueuedRequestsDoNotKeepAnothersOneBehindThemAll(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(new UserQuotas(8, Map.of(), Map.of())))) {
            NodeService s = bed.start();
            List<Allocation> held = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                held.add(one(s, ALICE, "--gpu=1"));
            }
            ExecutorService ex = Executors.newCachedThreadPool();
            try {
                List<Future<Allocation>> alices = new ArrayList<>();
                for (int i = 0; i < 20; i++) {
                    alices.add(ex.submit(() -> s.allocate(ALICE, GpuRequests.fromCliFlags("--gpu=1",
                            "--label=n=" + alices.size()), Optional.of(Duration.ofMinutes(2)), NEVER)));
                    waitForQueue(s, i + 1);
                }
                Future<Allocation> bob = ex.submit(() -> s.allocate(BOB, GpuRequests.fromCliFlags("--gpu=1"),
                        Optional.of(Duration.ofMinutes(2)), NEVER));
                waitForQueue(s, 21);
                List<Map<String, Object>> q = s.queueView();
                assertThat(q).hasSize(21);
                assertThat(q.subList(0, 2)).as("bob is within the first two places").anyMatch(e -> e.get("user")
                        .equals("bob"));
                int releases = 0;
                while (!bob.isDone()) {
                    assertThat(releases).as("bob is served by the second release at the latest").isLessThan(2);
                    s.release(ALICE, held.remove(0).id());
                    releases++;
                    // each release serves exactly one waiter (every request is one GPU): wait (up to 60 s) until
                    // that waiter has its answer, so the next round knows whether it was bob's
                    for (int i = 0; i < 6000 && served(alices) + (bob.isDone() ? 1 : 0) < releases; i++) {
                        Thread.sleep(10);
                    }
                    assertThat(served(alices) + (bob.isDone() ? 1 : 0)).as("waiters served after %d release(s)",
                            releases).isEqualTo(releases);
                }
                assertThat(bob.get(1, TimeUnit.MINUTES).owner()).contains("bob");
                // the rest of alice's are served in the order she asked, as her allocations end
                for (Allocation a : new ArrayList<>(held)) {
                    s.release(ALICE, a.id());
                }
                List<Integer> served = new ArrayList<>();
                for (Future<Allocation> f : alices) {
                    if (f.isDone()) {
                        served.add(Integer.parseInt(f.get().request().labels().get("n")));
                    }
                }
                assertThat(served).isSorted();
            } finally {
                ex.shutdownNow();
                // the interrupted waiters record their end before the bed (and @TempDir) go
                assertThat(ex.awaitTermination(1, TimeUnit.MINUTES)).as("waiters ended").isTrue();
            }
        }
        LedgerReader r = LedgerReader.read(tmp.resolve("state"));
        assertThat(r.doubleGrants).isEmpty();
        assertThat(r.peakGpusByOwner.get("uid:5001")).isLessThanOrEqualTo(8);
    }

    private static int served(List<Future<Allocation>> waiters) {
        return (int) waiters.stream().filter(Future::isDone).count();
    }

    /** Waits (up to 60 s: a loaded machine) until {@code n} requests wait in the queue, and checks no more do. */
    static void waitForQueue(NodeService s, int n) throws InterruptedException {
        for (int i = 0; i < 6000 && s.queue().size() < n; i++) {
            Thread.sleep(10);
        }
        assertThat(s.queue().size()).isEqualTo(n);
    }

    @Test
    void aQueuedRequestWhoseClientWentIsDroppedAndOneOverItsQuotaDoesNotBlockOthers(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(new UserQuotas(0, Map.of("alice", 2), Map.of())))) {
            NodeService s = bed.start();
            one(s, ALICE, "--gpu=2");
            List<Allocation> bobs = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                bobs.add(one(s, BOB, "--gpu=1"));
            }
            ExecutorService ex = Executors.newCachedThreadPool();
            try {
                // alice waits over her quota; carol waits for room; a client that goes away waits too
                Future<Allocation> alice = ex.submit(() -> s.allocate(ALICE, GpuRequests.fromCliFlags("--gpu=1"),
                        Optional.of(Duration.ofMinutes(2)), NEVER));
                waitForQueue(s, 1);
                AtomicBoolean gone = new AtomicBoolean();
                Future<Allocation> ghost = ex.submit(() -> s.allocate(BOB, GpuRequests.fromCliFlags("--gpu=1"),
                        Optional.of(Duration.ofMinutes(2)), gone::get));
                waitForQueue(s, 2);
                gone.set(true);
                for (int i = 0; i < 6000 && s.queue().size() > 1; i++) { // up to 60 s
                    Thread.sleep(10);
                }
                assertThat(s.queue().size()).as("the ghost's request was dropped").isEqualTo(1);
                assertThatThrownBy(ghost::get).hasCauseInstanceOf(FairQueue.Dropped.class);
                s.release(BOB, bobs.get(0).id());
                Allocation c = s.allocate(CAROL, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(
                        Duration.ofMinutes(1)), NEVER);
                assertThat(c.owner()).as("alice, over her quota, did not hold carol back").contains("carol");
                assertThat(alice.isDone()).isFalse();
                assertThat(Files.readString(bed.state.resolve("audit.log"))).contains("allocate.dropped");
            } finally {
                ex.shutdownNow();
                // the interrupted waiters record their end before the bed (and @TempDir) go
                assertThat(ex.awaitTermination(1, TimeUnit.MINUTES)).as("waiters ended").isTrue();
            }
        }
    }

    @Test
    void aWaitThatRunsOutIsRefusedWithTheLastReason(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(UserQuotas.none()))) {
            NodeService s = bed.start();
            one(s, ALICE, "--gpu=8");
            GpuAllocationException e = catchThrowableOfType(() -> s.allocate(BOB, GpuRequests.fromCliFlags("--gpu=1"),
                    Optional.of(Duration.ofMillis(300)), NEVER), GpuAllocationException.class);
            assertThat(e.reason()).isEqualTo(Reason.INSUFFICIENT_GPUS);
            assertThat(e.getMessage()).contains("gave up after waiting").contains("node service's queue");
            assertThat(s.queue().size()).isZero();
        }
    }

    @Test
    void theHeartbeatIsRefusedOutsideItsRangeNamingIt() {
        NodeService.Builder b = NodeService.builder();
        assertThatThrownBy(() -> b.heartbeat(Duration.ofMillis(50))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("heartbeat PT0.05S").hasMessageContaining("100ms..15s");
        assertThatThrownBy(() -> b.heartbeat(Duration.ofSeconds(16))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("100ms..15s");
        assertThat(b.heartbeat(Duration.ofMillis(100))).isSameAs(b);
        assertThat(b.heartbeat(Duration.ofSeconds(15))).isSameAs(b);
    }
}
