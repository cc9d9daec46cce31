package io.gpusched.accounting;

import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A sampler in a process of its own on a manual clock, for {@code SweepMarkKillTest}: over the state directory given,
 * one sweep at {@link AccountingNode#T0} (a checkpoint) and five more 10 s apart (none: checkpoints every minute),
 * then it says so and waits to be killed.
 */
public final class SweepMarkChild {
    private SweepMarkChild() {
    }

    /** @param args the state directory */
    public static void main(String[] args) throws InterruptedException {
        AccountingNode node = new AccountingNode(Path.of(args[0]),
                AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)));
        node.sweep();
        node.run(Duration.ofSeconds(10), 5);
        System.out.println("swept to " + node.clock.instant());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
