package io.gpusched.service.adversarial.review31;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review31: an owner an admin names is resolved to a uid through NSS (UserDirectory.lookup: {@code id -u -- NAME}),
 * and GNU id takes a number for a name: {@code --owner=<alice's uid>} is accepted, the allocation owned by alice's uid
 * under the name "<uid>" (NodeService.ownedBy). Its turn, its holdings and who may release it go by the uid (alice's),
 * but the quota is looked up by the NAME (DefaultGpuScheduler.quotaOf: limitFor(owner name)): alice's per-user limit
 * (gpu.users: alice = 2) does not apply to "<uid>", and alice's uid ends up holding 2 + 4 GPUs. Issue 33: "no one ever
 * holds more than their quota".
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnerNamedByUidEscapesTheUsersQuotaAttackTest {

    @Test
    void aUserNeverHoldsMoreThanTheirQuotaWhateverNameTheOwnerIsGivenBy(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        List<Allocation> made = new ArrayList<>();
        try (LocalUsers accounts = LocalUsers.create()) {
            LocalUsers.User aliceUser = accounts.user("alice");
            GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of(aliceUser.name(), 2), Map.of()))
                    .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration
                            .ofMillis(300)))
                    .build();
            try (ServiceBed bed = new ServiceBed(tmp.resolve("bed"), config)) {
                NodeService s = bed.start();
                Caller root = ServiceBed.root();
                Caller alice = ServiceBed.caller(aliceUser, false);
                try {
                    made.add(s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(),
                            () -> false));
                    String refused = null;
                    try {
                        made.add(s.allocate(root, GpuRequests.fromCliFlags(List.of("--gpu=4", "--owner=" + aliceUser
                                .uid())), Optional.empty(), () -> false));
                    } catch (RuntimeException e) {
                        refused = e.toString();
                    }
                    int aliceHolds = s.scheduler().allocations().stream()
                            .filter(a -> a.request().ownerUid().isPresent() && a
                                    .request().ownerUid().getAsLong() == aliceUser.uid())
                            .mapToInt(a -> a.deviceIndices()
                                    .size())
                            .sum();
                    LedgerReader ledger = LedgerReader.read(bed.state);
                    assertThat(aliceHolds).as("GPUs held by alice's uid %s (quota 2) after an admin asked for 4 with"
                            + " --owner=%s; refusal: %s; ledger by owner: %s; allocations %s", aliceUser.uid(),
                            aliceUser.uid(), refused, ledger.heldByOwner(), made).isLessThanOrEqualTo(2);
                } finally {
                    for (Allocation a : made) {
                        s.release(root, a.id());
                    }
                }
            }
        }
    }
}
