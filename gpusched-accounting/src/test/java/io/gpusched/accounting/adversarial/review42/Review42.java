package io.gpusched.accounting.adversarial.review42;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/** Shared fixtures of review42's tests. */
final class Review42 {
    private Review42() {
    }

    static IdlePolicy policy(Duration warnAfter, Duration actAfter, Duration grace) {
        return new IdlePolicy(1, Duration.ofMinutes(5), warnAfter, actAfter, IdlePolicy.Action.RELEASE, "TERM", grace,
                List.of(), false, List.of());
    }

    /** A node idle all along, swept once, with these checkpoints and this policy. */
    static AccountingNode node(Path dir, Duration checkpoint, IdlePolicy p) {
        AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults().withCheckpoint(checkpoint)
                .withIdle(p));
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.sweep();
        return node;
    }

    static Optional<Instant> first(List<IdleAction> steps, IdleStep step) {
        return steps.stream().filter(s -> s.action() == step).map(IdleAction::at).findFirst();
    }

    static String steps(List<IdleAction> steps) {
        StringBuilder b = new StringBuilder();
        for (IdleAction a : steps) {
            b.append("\n  ").append(a.at()).append(' ').append(a.action()).append(" idleFor=").append(a.idleFor())
                    .append(' ').append(a.detail());
        }
        return b.length() == 0 ? " (none)" : b.toString();
    }

    /** Copies a store's journals as a kill -9 leaves them (what was appended so far; no lock). */
    static void copyTree(Path from, Path to) {
        try {
            Files.createDirectories(to);
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(from, "*.{log,sum}")) {
                for (Path p : ds) {
                    Files.copy(p, to.resolve(p.getFileName()));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
