package io.gpusched.service.adversarial.review32;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
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
 * Review32: the caller resolver takes any printable name NSS gives a uid, non-ASCII included
 * (CallerResolver.name: c > 0x20, not a control), but the service's directory, which gives the scheduler a user's
 * groups for per-group quotas, neither remembers nor looks up a name outside printable ASCII
 * (UserDirectory.remember / lookup: UserQuotas.validName, c < 0x7f): such a user has no groups, so a per-group limit
 * never applies to them. With gpu.users.per_group {students: 2} and no node-wide limit, a member named "gsu-jos\u00e9"
 * holds 3 GPUs (any number), while "gsu-ann", in the same group, is refused her third. Issue 33: no one ever holds
 * more than their quota.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UserWithANonAsciiNameEscapesTheGroupQuotaAttackTest {

    @Test
    void aGroupsLimitHoldsForAMemberWhoseNameIsNotAscii(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of(), Map.of("gsu-students", 2))).service(
                ServiceSettings.defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller ann = ServiceBed.caller("gsu-ann", 63261, false, "gsu-ann", "gsu-students");
            Caller jose = ServiceBed.caller("gsu-jos\u00e9", 63262, false, "gsu-jos\u00e9", "gsu-students");
            List<Allocation> anns = new ArrayList<>();
            List<Allocation> joses = new ArrayList<>();
            try {
                for (int i = 0; i < 2; i++) {
                    anns.add(s.allocate(ann, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                            () -> false));
                }
                Throwable annsThird = catchThrowable(() -> anns.add(s.allocate(ann, GpuRequests.fromCliFlags(List.of(
                        "--gpu=1")), Optional.empty(), () -> false)));
                assertThat(annsThird).as("control: gsu-ann's third GPU, over her group's limit of 2").isInstanceOf(
                        GpuAllocationException.class);
                assertThat(((GpuAllocationException) annsThird).reason()).isEqualTo(Reason.QUOTA_EXCEEDED);
                Throwable refused = null;
                for (int i = 0; i < 3 && refused == null; i++) {
                    try {
                        joses.add(s.allocate(jose, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                                () -> false));
                    } catch (RuntimeException e) {
                        refused = e;
                    }
                }
                long held = s.scheduler().allocations().stream().filter(a -> a.request().ownerUid().orElse(-1) == 63262)
                        .mapToLong(a -> a.deviceIndices().size()).sum();
                assertThat(held).as("GPUs held by gsu-jos\u00e9, a member of gsu-students (limit 2); the refusal of"
                        + " the third: %s", refused).isLessThanOrEqualTo(2);
            } finally {
                for (Allocation a : anns) {
                    s.release(ann, a.id());
                }
                for (Allocation a : joses) {
                    s.release(jose, a.id());
                }
            }
        }
    }
}
