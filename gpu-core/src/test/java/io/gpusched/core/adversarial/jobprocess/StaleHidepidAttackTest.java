package io.gpusched.core.adversarial.jobprocess;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.testing.LocalUsers;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * hidepid turned on while a user's process of the node runs: the documented way to harden a running host is
 * {@code mount -o remount,hidepid=2 /proc}. A long-running process of bob's (an engine's JVM, a state-group member)
 * that has already looked at {@code /proc} once must not take alice's live, now invisible holder for dead and be
 * granted her GPUs. Bob's JVM runs in a mount namespace with a proc instance of its own, remounted there by the test.
 */
@Tag("adversarial")
class StaleHidepidAttackTest {

    @Test
    @Timeout(300)
    void aProcRemountedHidepidWhileAProcessRunsDoesNotMakeOthersLiveHoldersLookDead() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                "mount -t proc proc /proc && mount -o remount,hidepid=2 /proc"), 30).exit() == 0,
                "needs unshare and a proc mount of its own that can be remounted hidepid=2");
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gshp-");
        Process alice = null;
        Process bob = null;
        long job = -1;
        try (LocalUsers users = LocalUsers.create()) {
            Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
            String group = users.group("hs");
            LocalUsers.User a = users.user("alice", group);
            LocalUsers.User b = users.user("bob", group);
            String cp = HiddenProcessAttackTest.readableClassPath(base.resolve("cp"));
            Path state = Files.createDirectory(base.resolve("state"));
            assertThat(LocalUsers.run(List.of("chgrp", group, state.toString()), 30).exit()).isZero();
            assertThat(LocalUsers.run(List.of("chmod", "2770", state.toString()), 30).exit()).isZero();
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();

            bob = new ProcessBuilder("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                    "mount -t proc proc /proc && exec setpriv --reuid=" + b.uid() + " --regid=" + b.gid()
                            + " --init-groups -- \"$0\" -Xmx128m -cp \"$1\" \"$2\" \"$3\" \"$4\"",
                    java, cp, StaleHidepidChild.class.getName(), state.toString(), group)
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
            BufferedReader bobOut = new BufferedReader(new InputStreamReader(bob.getInputStream(),
                    StandardCharsets.UTF_8));
            String ready = bobOut.readLine();
            assertThat(ready).as("bob's process started").isNotNull().startsWith("READY");

            alice = new ProcessBuilder("setpriv", "--reuid=" + a.uid(), "--regid=" + a.gid(), "--init-groups", "--",
                    java, "-Xmx128m", "-cp", cp, HiddenProcessChild.class.getName(), "hold", state.toString(), group)
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String line = new BufferedReader(new InputStreamReader(alice.getInputStream(), StandardCharsets.UTF_8))
                    .readLine();
            assertThat(line).as("alice's run started its job").isNotNull();
            String id = line.split(" ")[0];
            job = Long.parseLong(line.split(" ")[1]);

            List<String> remount = new ArrayList<>(List.of("nsenter", "-t", Long.toString(bob.pid()), "-m", "--",
                    "mount", "-o", "remount,hidepid=2", "/proc"));
            LocalUsers.Result r = LocalUsers.run(remount, 30);
            assertThat(r.exit()).as("remount bob's /proc hidepid=2: %s", r.err()).isZero();
            try (OutputStream in = bob.getOutputStream()) {
                in.write("go\n".getBytes(StandardCharsets.UTF_8));
            }
            StringBuilder out = new StringBuilder();
            for (String l = bobOut.readLine(); l != null; l = bobOut.readLine()) {
                out.append(l).append('\n');
            }
            assertThat(bob.waitFor(120, TimeUnit.SECONDS)).isTrue();
            assertThat(alice.isAlive() && ProcessHandle.of(job).map(ProcessHandle::isAlive).orElse(false))
                    .as("alice's run and job still run").isTrue();
            assertThat(out.toString())
                    .as("bob (hidepid=2 since after his process started) on alice's live run %s: %s", id, out)
                    .contains("LIVE [" + id + "]").contains("REFUSED INSUFFICIENT_GPUS").doesNotContain("GOT");
        } finally {
            for (Process p : new Process[]{alice, bob}) {
                if (p != null) {
                    p.destroyForcibly();
                    p.waitFor();
                }
            }
            if (job > 0) {
                ProcessHandle.of(job).ifPresent(ProcessHandle::destroyForcibly);
            }
            try (Stream<Path> w = Files.walk(base)) {
                w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }
}
