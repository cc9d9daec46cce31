package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of holder processes: a live pid with another start time is not the holder; a zombie holder
 * has exited.
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class LedgerHolderProcessAttackTest {

    @TempDir
    Path tmp;

    @Test
    void aLivePidWithAnotherStartTimeIsNotTheHolder() throws Exception {
        Path dir = tmp.resolve("pid");
        HolderProcess me = HolderProcess.current();
        HolderProcess impostor = new HolderProcess(me.pid(), me.startTime() + 1);
        assertFalse(impostor.isAlive());
        try (GpuScheduler a = open(dir)) {
            String id = null;
            try {
                id = a.allocate(GpuRequest.builder().count(1).exclusive().holder(impostor).build()).id();
            } catch (GpuAllocationException e) {
                // refusing a dead holder up front is fine
            }
            a.refresh();
            if (id != null) {
                assertTrue(a.allocation(id).isEmpty(), "an allocation bound to a gone holder is reclaimed");
            }
            assertEquals(4, countFree(a));
        }
    }

    @Test
    void aZombieHolderIsGone() throws Exception {
        Path dir = tmp.resolve("zombie");
        // sh starts a short child, then execs sleep, which never reaps it: the child becomes a zombie
        Process p = new ProcessBuilder("sh", "-c", "sleep 0.3 & echo $!; exec sleep 60").start();
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            long pid = Long.parseLong(r.readLine().trim());
            HolderProcess holder = HolderProcess.of(pid);
            try (GpuScheduler a = open(dir)) {
                Allocation x = a.allocate(GpuRequest.builder().count(1).exclusive().holder(holder).build());
                // wait (no deadline but the test's) until the kernel shows the child as a zombie
                Path stat = Path.of("/proc/" + pid + "/stat");
                while (true) {
                    String s = Files.readString(stat);
                    if (s.substring(s.lastIndexOf(')') + 2).startsWith("Z")) {
                        break;
                    }
                    Thread.sleep(20);
                }
                a.refresh();
                assertTrue(a.allocation(x.id()).isEmpty(), "a zombie holder has exited: its allocation is reclaimed");
            }
        } finally {
            p.destroyForcibly();
            p.waitFor();
        }
    }

    private static int countFree(GpuScheduler s) {
        Set<Integer> used = new HashSet<>();
        s.allocations().forEach(a -> used.addAll(a.deviceIndices()));
        return 4 - used.size();
    }
}
