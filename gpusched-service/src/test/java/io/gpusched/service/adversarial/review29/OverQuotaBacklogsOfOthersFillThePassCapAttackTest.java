package io.gpusched.service.adversarial.review29;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review29: OverQuotaLaterRequestsFillTheUsersBackfillCap across users, on the pass cap (BATCH, 64 tries a pass).
 * FairQueue.backfillBehind's pre-check (review27) lets a later request skip its try, uncounted, only when the GPUs are
 * short; a request over its user's quota passes it, is tried, refused QUOTA_EXCEEDED, and counts. With
 * gpu.users.max_gpus 1: ten users each hold a share of GPU 0 and wait for one more GPU eight times (each over their
 * quota: it keeps nothing). Erin holds nothing; she waits for GPU 0 exclusively (busy: it keeps GPU 0), seven more times
 * for GPU 0 (hopeless: skipped, uncounted), then for any one GPU: within her quota, GPUs 1 to 7 idle and kept for no
 * one. The ten users' seven later requests each take 70 tries before the pass reaches her 9th request's round, and the
 * pass stops at 64: it is never tried, in any pass, while the others' over-quota requests wait. SERVICE.md: "requests
 * ..., however many and however different, do not keep one behind them from being tried"; "Nothing is kept for a
 * request over its user's quota"; issue 33: no user can stall other users' grants.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OverQuotaBacklogsOfOthersFillThePassCapAttackTest {

    @Test
    void erinsRequestForAnIdleGpuIsTriedBehindTenUsersOverQuotaBacklogs(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(1, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            List<Caller> users = new ArrayList<>();
            List<Allocation> shares = new ArrayList<>();
            List<Queued> waiting = new ArrayList<>();
            Caller erin = ServiceBed.caller("gsu-erin", 62950, false);
            try {
                for (int i = 0; i < 10; i++) {
                    Caller u = ServiceBed.caller("gsu-u" + i, 62930 + i, false);
                    users.add(u);
                    shares.add(s.allocate(u, GpuRequests.fromCliFlags(List.of("--devices=0", "--shared=1GB")),
                            Optional.empty(), () -> false));
                }
                for (Caller u : users) {
                    for (int k = 0; k < 8; k++) {
                        waiting.add(Queued.queue(s, u, "--gpu=1")); // 1 held + 1 > 1: over the quota
                    }
                }
                for (int k = 0; k < 8; k++) {
                    waiting.add(Queued.queue(s, erin, "--devices=0")); // GPU 0 shared by others: busy
                }
                assertThat(waiting).as("all wait").allMatch(q -> !q.result.isDone());
                try (Queued one = Queued.queue(s, erin, "--gpu=1")) {
                    boolean served = Clients.await(one.result::isDone, 20);
                    assertThat(served && !one.result.isCompletedExceptionally()).as("erin's 9th waiting request, for"
                            + " any one GPU (she holds none, quota 1; GPUs 1-7 idle, kept for no one) behind ten"
                            + " users' over-quota backlogs of 8; queue size %s; result: %s", s.queueView().size(),
                            one.result).isTrue();
                }
            } finally {
                for (Queued q : waiting) {
                    q.gone.set(true);
                }
                for (int i = 0; i < shares.size(); i++) {
                    s.release(users.get(i), shares.get(i).id());
                }
            }
        }
    }
}
