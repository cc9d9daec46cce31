package io.gpusched.core.adversarial.jobprocess;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.testing.LocalUsers;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 36's job process record and the holder it is bound to, on a node whose {@code /proc} is mounted
 * {@code hidepid=2} (a common hardening: a user sees only their own processes). Two members of the state group share
 * one state directory: alice's unfenced run (holder: her JVM; job process: her {@code sleep}) holds the whole node;
 * bob's process of the node opens the ledger. Neither alice's run nor her job is visible to bob, and gpusched reads an
 * invisible {@code /proc/<pid>} as a dead process: bob's process reclaims alice's live allocation (the JP record that
 * should hold it back is "not alive" too) and is granted her GPUs while her job runs on them. Real users
 * (useradd/setpriv); bob's JVM runs in a mount namespace of its own with a proc instance mounted {@code hidepid=2}
 * (per mount since Linux 5.8), so the host's {@code /proc} is untouched.
 */
@Tag("adversarial")
class HiddenProcessAttackTest {

    @Test
    @Timeout(300)
    void aLiveRunsGpusAreNotTakenByAUserWhoCannotSeeItsProcesses() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("unshare", "--mount", "--propagation", "private", "--", "mount", "-t", "proc",
                "-o", "hidepid=2", "proc", "/proc"), 30).exit() == 0, "needs unshare and a proc mount of its own");
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gshp-");
        Process alice = null;
        long job = -1;
        try (LocalUsers users = LocalUsers.create()) {
            Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
            String group = users.group("hp");
            LocalUsers.User a = users.user("alice", group);
            LocalUsers.User b = users.user("bob", group);
            String cp = readableClassPath(base.resolve("cp"));
            Path state = Files.createDirectory(base.resolve("state"));
            assertThat(LocalUsers.run(List.of("chgrp", group, state.toString()), 30).exit()).isZero();
            assertThat(LocalUsers.run(List.of("chmod", "2770", state.toString()), 30).exit()).isZero();
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();

            ProcessBuilder pb = new ProcessBuilder("setpriv", "--reuid=" + a.uid(), "--regid=" + a.gid(),
                    "--init-groups", "--", java, "-Xmx128m", "-cp", cp, HiddenProcessChild.class.getName(), "hold",
                    state.toString(), group).redirectError(ProcessBuilder.Redirect.DISCARD);
            alice = pb.start();
            String line = new BufferedReader(new InputStreamReader(alice.getInputStream(), StandardCharsets.UTF_8))
                    .readLine();
            assertThat(line).as("alice's run started its job").isNotNull();
            String id = line.split(" ")[0];
            job = Long.parseLong(line.split(" ")[1]);

            LocalUsers.Result r = LocalUsers.run(List.of("unshare", "--mount", "--propagation", "private", "--",
                    "/bin/sh", "-c", "mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=" + b.uid()
                            + " --regid=" + b.gid() + " --init-groups -- \"$0\" -Xmx128m -cp \"$1\" \"$2\" take"
                            + " \"$3\" \"$4\"",
                    java, cp, HiddenProcessChild.class.getName(), state.toString(), group), 120);
            assertThat(r.exit()).as("bob's process: %s %s", r.out(), r.err()).isZero();
            assertThat(alice.isAlive() && ProcessHandle.of(job).map(ProcessHandle::isAlive).orElse(false))
                    .as("alice's run and job still run").isTrue();
            assertThat(r.out())
                    .as("bob (hidepid=2) sees alice's live run %s (job pid %d, running) as gone: %s", id, job,
                            r.out().strip())
                    .contains("LIVE [" + id + "]").contains("REFUSED INSUFFICIENT_GPUS").doesNotContain("GOT");
        } finally {
            if (alice != null) {
                alice.destroyForcibly();
                alice.waitFor();
            }
            if (job > 0) {
                ProcessHandle.of(job).ifPresent(ProcessHandle::destroyForcibly);
            }
            try (Stream<Path> w = Files.walk(base)) {
                w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** @return this test's class path, copied under {@code dir} where any user may read it */
    static String readableClassPath(Path dir) throws Exception {
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
