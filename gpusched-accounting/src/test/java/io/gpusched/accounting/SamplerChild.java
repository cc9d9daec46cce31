package io.gpusched.accounting;

import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;

/**
 * A sampler in a process of its own, for the crash test: opens the simulated node over the state directory given,
 * samples every 100 ms with a 1-s checkpoint, until it is killed.
 */
public final class SamplerChild {
    private SamplerChild() {
    }

    /** @param args the state directory */
    public static void main(String[] args) throws InterruptedException {
        GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(Path.of(args[0]))
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
        AccountingSampler s = AccountingSampler.open(AccountingStore.at(Path.of(args[0])),
                AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(1)), node.inventory(), null,
                new HostIdleEffects(node.scheduler()), Clock.systemUTC()).orElseThrow();
        node.scheduler().addListener(s);
        System.out.println("sampling");
        System.out.flush();
        while (true) {
            node.scheduler().refresh();
            s.sweep(node.inventory().sample(), node.scheduler().allocations());
            Thread.sleep(100);
        }
    }
}
