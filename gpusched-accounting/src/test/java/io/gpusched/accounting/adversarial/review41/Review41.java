package io.gpusched.accounting.adversarial.review41;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Shared fixtures of review41's tests. */
final class Review41 {
    private Review41() {
    }

    /** window 5 min, warn_after 10, act_after 20, grace 8. */
    static IdlePolicy policy(IdlePolicy.Action action, boolean dryRun) {
        return new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), action,
                "TERM", Duration.ofMinutes(8), List.of(), dryRun, List.of());
    }

    static AccountingSettings settings(IdlePolicy p, Duration checkpoint) {
        return AccountingSettings.defaults().withCheckpoint(checkpoint).withIdle(p);
    }

    /** A node idle all along, swept once. */
    static AccountingNode node(Path dir, AccountingSettings s) {
        AccountingNode node = new AccountingNode(dir, s);
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.sweep();
        return node;
    }

    /** Stops the node's sampler (a planned stop), waits {@code down}, and starts one with other settings. */
    static void restartWith(AccountingNode node, Duration down, AccountingSettings s) {
        node.stopSampler();
        node.clock.advance(down);
        HostIdleEffects effects = new HostIdleEffects(node.scheduler).listener(node.notices::add);
        node.sampler = AccountingSampler.open(node.store, s, node.inventory, node.attribution, effects, node.clock)
                .orElseThrow();
        node.scheduler.addListener(node.sampler);
        node.sampler.knownLive(node.scheduler.allocations());
    }

    /** Sweeps every 10 s, a minute at a time, for at most {@code minutes} or until {@code id} is released. */
    static List<IdleAction> runUntilReleased(AccountingNode node, String id, int minutes) {
        List<IdleAction> out = new ArrayList<>();
        for (int m = 0; m < minutes && node.scheduler.allocations().stream().anyMatch(x -> x.id().equals(id)); m++) {
            out.addAll(node.run(Duration.ofSeconds(10), 6));
        }
        return out;
    }

    static String steps(List<IdleAction> steps) {
        StringBuilder b = new StringBuilder();
        for (IdleAction a : steps) {
            b.append("\n  ").append(a.at()).append(' ').append(a.action()).append(' ').append(a.detail());
        }
        return b.toString();
    }

    /** Copies a store's journals as a kill -9 leaves them (what was appended and forced so far; no lock). */
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
