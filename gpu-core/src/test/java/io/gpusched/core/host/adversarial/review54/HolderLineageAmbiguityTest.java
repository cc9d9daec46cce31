package io.gpusched.core.host.adversarial.review54;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 54. AllocationAttribution's holder rule ("the process is the allocation's holder or a descendant of it") asks
 * the holders in the order of the list it is given and charges a process to the first holder found anywhere in its
 * lineage. Where two holders of one shared GPU are both in a process's lineage, the answer is the list's order, not
 * the process's:
 * <ul>
 *   <li>nested holders: a batch script (pid 100) holds allocation a1 and runs a step that acquires a2 (its client, pid
 *       200, holds it) and starts the training (pid 300) below it. The training is charged to a1, the allocation of
 *       the outer script, although the nearest holder it runs under is a2's: a2 reads idle while its work runs;</li>
 *   <li>one client process (HolderProcess.current()) holding two shared allocations of the GPU: its child is charged
 *       to whichever comes first in the list, a guess docs/ACCOUNTING.md rules out ("a guess would put one user's
 *       work on another's bill"; the other allocation then reads idle and may be reclaimed).</li>
 * </ul>
 */
@Tag("adversarial")
class HolderLineageAmbiguityTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aProcessIsChargedToTheNearestHolderItRunsUnderNotTheFirstListed() throws IOException {
        process(100, 1, 5_000); // the batch script: holder of a1
        process(200, 100, 6_000); // the step's client: holder of a2
        process(300, 200, 7_000); // the training, below a2's holder (and so below a1's too)
        Allocation a1 = shared("a1", new HolderProcess(100, 5_000));
        Allocation a2 = shared("a2", new HolderProcess(200, 6_000));
        AllocationAttribution rule = AllocationAttribution.of(tmp.resolve("proc"), tmp.resolve("cgroup"));
        assertThat(rule.ownerOf(gpu, 300, List.of(a2, a1)))
                .as("holders listed a2, a1").contains(UsageOwner.allocation("a2"));
        assertThat(rule.ownerOf(gpu, 300, List.of(a1, a2)))
                .as("pid 300 runs below a2's holder (pid 200), which runs below a1's (pid 100): it is a2's work,"
                        + " whatever the order the holders are listed in (listed a1, a2)")
                .contains(UsageOwner.allocation("a2"));
    }

    @Test
    void aChildOfOneHolderOfTwoAllocationsIsNotChargedByListOrder() throws IOException {
        process(100, 1, 5_000); // one client process holding both allocations
        process(300, 100, 7_000);
        HolderProcess client = new HolderProcess(100, 5_000);
        Allocation a1 = shared("a1", client);
        Allocation a2 = shared("a2", client);
        AllocationAttribution rule = AllocationAttribution.of(tmp.resolve("proc"), tmp.resolve("cgroup"));
        Optional<UsageOwner> listedA1First = rule.ownerOf(gpu, 300, List.of(a1, a2));
        Optional<UsageOwner> listedA2First = rule.ownerOf(gpu, 300, List.of(a2, a1));
        assertThat(listedA1First)
                .as("whom pid 300 (child of the one holder of a1 and a2) is charged to must not depend on the order"
                        + " the holders are listed in: listed a1, a2 -> %s; listed a2, a1 -> %s (nothing can tell"
                        + " which allocation's it is, so charging it to one is a guess)", listedA1First, listedA2First)
                .isEqualTo(listedA2First);
    }

    private Allocation shared(String id, HolderProcess holder) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().holder(holder)
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }

    private void process(int pid, int ppid, long start) throws IOException {
        Path d = Files.createDirectories(tmp.resolve("proc").resolve(Integer.toString(pid)));
        StringBuilder stat = new StringBuilder(pid + " (python3) S " + ppid);
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(' ').append(start).append(" 0 0\n");
        Files.writeString(d.resolve("stat"), stat.toString());
        Files.writeString(d.resolve("cgroup"), "0::/user.slice/user-1000.slice/session-3.scope\n");
    }
}
