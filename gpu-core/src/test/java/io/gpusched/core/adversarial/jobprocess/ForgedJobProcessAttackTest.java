package io.gpusched.core.adversarial.jobprocess;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.testing.LocalUsers;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 36, the job process record ({@code JP}) of a run without a cgroup: a reclaim SIGKILLs the recorded pid while
 * its start time matches. The record is whatever a writer of the ledger says: a member of the state group (an engine's
 * service user beside the root service, README "One node, one ledger" / {@code gpu.state_group}) names a process of
 * root's as its allocation's job and exits; the next root process of the node reclaims the allocation and kills
 * root's process for it. The job-cgroup record has a guard for the same abuse ("only a directory named job-&lt;id&gt;
 * on a cgroup file system ... is ever acted on"); the job process record has none (not the owner's, not the
 * holder's child). Real users: a group and a member made with groupadd/useradd, the member's JVM run with setpriv.
 */
@Tag("adversarial")
class ForgedJobProcessAttackTest {

    @Test
    @Timeout(300)
    void aStateGroupMemberCannotMakeRootKillAProcessOfRootsByRecordingItAsItsJob() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv: runs the member's JVM as its own user");
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gsjp-");
        Process victim = null;
        try (LocalUsers users = LocalUsers.create()) {
            Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
            String group = users.group("jp");
            LocalUsers.User eve = users.user("eve", group);
            String cp = readableClassPath(base.resolve("cp"));
            Path state = Files.createDirectory(base.resolve("state"));
            assertThat(LocalUsers.run(List.of("chgrp", group, state.toString()), 30).exit()).isZero();
            assertThat(LocalUsers.run(List.of("chmod", "2770", state.toString()), 30).exit()).isZero();

            // a process of root's (pid 1, the service, a root daemon: any would do)
            victim = new ProcessBuilder("sleep", "300").start();
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            LocalUsers.Result r = LocalUsers.runAs(eve, List.of(java, "-Xmx128m", "-cp", cp,
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", ForgedJobProcessChild.class.getName(),
                    state.toString(), group, Long.toString(victim.pid())), 120);
            assertThat(r.exit()).as("the member's engine: %s %s", r.out(), r.err()).isZero();
            String id = r.out().strip();
            assertThat(victim.isAlive()).as("root's process is alive before root reads the ledger").isTrue();

            // root's process of the node (the service, root's gpusched) reads and changes the ledger: the member's
            // allocation has a dead holder and is reclaimed
            try (GpuScheduler root = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10"))
                    .stateDir(state).config(GpuConfig.builder().stateGroup(group).build())
                    .maintenanceInterval(Duration.ZERO).auditLogging(false).build()) {
                root.allocations();
                try {
                    root.allocate(GpuRequest.builder().count(4).build());
                } catch (GpuAllocationException held) {
                    // the forged allocation kept held: not what this test is about
                }
            }
            victim.waitFor(1, TimeUnit.SECONDS); // a kill sent above has landed by now
            assertThat(victim.isAlive())
                    .as("root's process pid %d, named as the job of %s by %s (a member of the state group), was"
                            + " SIGKILLed by root's reclaim", victim.pid(), id, eve.name())
                    .isTrue();
        } finally {
            if (victim != null) {
                victim.destroyForcibly();
            }
            try (Stream<Path> w = Files.walk(base)) {
                w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** @return this test's class path, copied under {@code dir} where any user may read it */
    private static String readableClassPath(Path dir) throws Exception {
        List<String> out = new ArrayList<>();
        int n = 0;
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path from = Path.of(e);
            if (!Files.exists(from)) {
                continue;
            }
            Path to = dir.resolve(Integer.toString(n++)).resolve(from.getFileName());
            Files.createDirectories(to.getParent());
            if (Files.isDirectory(from)) {
                try (Stream<Path> w = Files.walk(from)) {
                    for (Path p : w.toList()) {
                        Path t = to.resolve(from.relativize(p).toString());
                        if (Files.isDirectory(p)) {
                            Files.createDirectories(t);
                        } else {
                            Files.copy(p, t, StandardCopyOption.REPLACE_EXISTING);
                        }
                    }
                }
            } else {
                Files.copy(from, to, StandardCopyOption.REPLACE_EXISTING);
            }
            out.add(to.toString());
        }
        try (Stream<Path> w = Files.walk(dir)) {
            for (Path p : w.toList()) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(Files.isDirectory(p) ? "rwxr-xr-x"
                        : "rw-r--r--"));
            }
        }
        return String.join(File.pathSeparator, out);
    }
}
