package io.gpusched.core.adversarial.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One state directory reached by two names in one JVM: the directory itself and a symbolic link to it (a host that
 * configures {@code /var/lib/gpusched} in one component and {@code /srv/gpusched -> /var/lib/gpusched} in another).
 * NodeLock's Javadoc: fcntl locks are per process, so this process's threads take a JVM-wide lock per directory first.
 * Two schedulers, one per name, change the ledger from two threads at once; every change must either succeed or be
 * refused with a {@link GpuAllocationException}, and the file (the test's own parser, {@link LedgerAttacks#checkFile})
 * must stay a valid ledger with no GPU in two live allocations.
 */
@Tag("adversarial")
class StateDirectoryAliasAttackTest {

    @TempDir
    Path tmp;

    @Test
    void twoNamesOfOneStateDirectoryInOneJvmShareTheNodesLock() throws Exception {
        Path real = tmp.resolve("real");
        try (GpuScheduler s = LedgerAttacks.open(real)) {
            s.release(s.allocate(LedgerAttacks.one()).id());
        }
        Path alias = Files.createSymbolicLink(tmp.resolve("alias"), real);
        ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        CountDownLatch go = new CountDownLatch(1);
        try (GpuScheduler a = LedgerAttacks.open(real); GpuScheduler b = LedgerAttacks.open(alias)) {
            List<Thread> ts = new ArrayList<>();
            for (GpuScheduler s : List.of(a, b, a, b)) {
                Thread t = new Thread(() -> {
                    try {
                        go.await();
                        for (int i = 0; i < 150; i++) {
                            try {
                                Allocation x = s.allocate(GpuRequest.builder().count(1).exclusive().build());
                                assertTrue(s.release(x.id()), "release of " + x.id());
                            } catch (GpuAllocationException e) {
                                // the node is full for the moment: a refusal is a valid answer
                            }
                        }
                    } catch (Throwable e) {
                        unexpected.add(e);
                    }
                });
                t.start();
                ts.add(t);
            }
            go.countDown();
            for (Thread t : ts) {
                t.join();
            }
        }
        List<String> kinds = unexpected.stream().map(e -> e.getClass().getName() + ": " + e.getMessage()).distinct()
                .limit(3).toList();
        assertEquals(List.of(), kinds, unexpected.size() + " changes failed with something else than a refusal");
        LedgerAttacks.checkFile(real.resolve("ledger"));
        try (GpuScheduler c = LedgerAttacks.open(real)) {
            assertEquals(List.of(), c.allocations(), "everything allocated was released");
        }
    }
}
