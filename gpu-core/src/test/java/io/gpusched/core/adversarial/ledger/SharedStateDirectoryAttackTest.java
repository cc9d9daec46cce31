package io.gpusched.core.adversarial.ledger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A state directory shared with a state group ({@code gpu.state_group}): what is accepted (a setgid directory the
 * group owns, files of the group whoever of it made them, with the modes gpusched gives them) and what is refused
 * (another group's write, a shared directory that is not setgid, a group that does not exist, and, in any directory,
 * a ledger that is a link to a safe file, a ledger with a second hard link, links and FIFOs in place of the lock and
 * node files, a waiters directory replaced by a link). Runs as root with a group made for the test ({@code groupadd},
 * a random name, removed afterwards); the files' group is set with {@code chgrp} as a member would have made them.
 */
@Tag("adversarial")
class SharedStateDirectoryAttackTest {
    static String group;

    @TempDir
    Path tmp;

    @BeforeAll
    static void group() throws Exception {
        assumeTrue(Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid")),
                "needs root: makes a group for the shared directory");
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        group = "gss-" + HexFormat.of().formatHex(r);
        assumeTrue(run("groupadd", group) == 0, "groupadd works here");
    }

    @AfterAll
    static void removeGroup() throws Exception {
        if (group != null) {
            run("groupdel", group);
        }
    }

    private static int run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        return p.waitFor(60, TimeUnit.SECONDS) ? p.exitValue() : -1;
    }

    private static GpuScheduler open(Path dir, String stateGroup) {
        return GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10")).stateDir(dir)
                .config(GpuConfig.builder().stateGroup(stateGroup).build()).maintenanceInterval(Duration.ZERO)
                .auditLogging(false).build();
    }

    /** @return a directory as an admin makes it for the engines: root's, the state group's, setgid, 2770 */
    private Path shared(String name) throws Exception {
        Path d = Files.createDirectory(tmp.resolve(name));
        assertThat(run("chgrp", group, d.toString())).isZero();
        assertThat(run("chmod", "2770", d.toString())).isZero();
        return d;
    }

    private static int mode(Path p) throws Exception {
        return (Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS) & 07777;
    }

    private static void refused(Path dir, String stateGroup, String named) {
        assertThatThrownBy(() -> {
            try (GpuScheduler s = open(dir, stateGroup)) {
                s.allocate(GpuRequest.builder().count(1).build());
            }
        }).isInstanceOfSatisfying(LedgerException.class, e -> {
            // the node identity file has said CORRUPT for what is not a regular file since it was introduced
            assertThat(e.kind()).as(e.getMessage()).isIn(LedgerException.Kind.INSECURE_PERMISSIONS,
                    named.endsWith("/node") ? LedgerException.Kind.CORRUPT : LedgerException.Kind.INSECURE_PERMISSIONS);
            assertThat(e.getMessage()).contains(named);
        });
    }

    @Test
    void aSharedDirectoryIsUsedAndWhatGpuschedMakesInItIsTheGroups() throws Exception {
        Path d = shared("ok");
        try (GpuScheduler s = open(d, group)) {
            s.allocate(GpuRequest.builder().count(2).build());
            s.allocate(GpuRequest.builder().count(1).build(), Duration.ofMillis(1));
        }
        GroupPrincipal g = d.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByGroupName(group);
        for (String f : List.of("ledger", "ledger.lock", "node")) {
            Path p = d.resolve(f);
            assertThat(Files.readAttributes(p, PosixFileAttributes.class,
                    LinkOption.NOFOLLOW_LINKS).group()).as(f).isEqualTo(g);
            assertThat(mode(p)).as(f + " mode").isEqualTo(0660);
        }
        if (Files.exists(d.resolve("waiters"))) {
            assertThat(mode(d.resolve("waiters"))).as("waiters").isEqualTo(02770);
        }
        // a member made the files (their owner is another user): still the group's, still used
        assertThat(run("chown", "nobody", d.resolve("ledger").toString(), d.resolve("node").toString())).isZero();
        try (GpuScheduler s = open(d, group)) {
            assertThat(s.allocations()).hasSize(2);
        }
        // a simulated node's subdirectory made in a shared base is shared too
        Path sub = d.resolve("simulated").resolve("pcie");
        try (GpuScheduler s = open(sub, group)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        assertThat(mode(d.resolve("simulated"))).isEqualTo(02770);
        assertThat(mode(sub)).isEqualTo(02770);
        assertThat(mode(sub.resolve("ledger"))).isEqualTo(0660);
    }

    @Test
    void groupWriteIsRefusedWithoutTheStateGroupForAnotherGroupAndWithoutSetgid() throws Exception {
        Path d = shared("nogroup");
        refused(d, null, d.toString()); // no state group configured: as before, the group may not write
        refused(d, "root", d.toString()); // another group than the directory's
        Path plain = shared("nosetgid");
        assertThat(run("chmod", "g-s", plain.toString())).isZero();
        assertThatThrownBy(() -> open(plain, group)).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.getMessage()).contains("chmod g+s"));
        assertThatThrownBy(() -> open(shared("unknown"), "gss-no-such-group")).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("gss-no-such-group");
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  state_group: \"a b/../c\"\n", "test.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.state_group");
        assertThat(GpuConfig.parse("gpu:\n  state_group: " + group + "\n", "test.yaml").stateGroup())
                .contains(group);
        // a file of the shared directory writable by others is refused whoever's group it is
        Path d2 = shared("otherwrite");
        try (GpuScheduler s = open(d2, group)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        Files.setPosixFilePermissions(d2.resolve("ledger"), PosixFilePermissions.fromString("rw-rw-rw-"));
        refused(d2, group, d2.resolve("ledger").toString());
    }

    /** The defect the last stop noted: a writer followed a ledger that is a symbolic link to a safe file. */
    @Test
    void aLedgerLinkedToASafeFileIsNotFollowedByAWriterAndItsTargetIsUntouched() throws Exception {
        for (String g : new String[]{null, group}) {
            Path d = g == null ? Files.createDirectory(tmp.resolve("plain-link")) : shared("shared-link");
            try (GpuScheduler s = open(d, g)) {
                s.allocate(GpuRequest.builder().count(1).build());
            }
            Path target = tmp.resolve("target-" + (g == null ? "plain" : "shared"));
            Files.move(d.resolve("ledger"), target);
            Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("rw-------"));
            byte[] before = Files.readAllBytes(target);
            Files.createSymbolicLink(d.resolve("ledger"), target);
            refused(d, g, "symbolic link");
            assertThat(Files.readAllBytes(target)).as("the link's target").isEqualTo(before);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aLedgerWithASecondHardLinkAndLinksOrFifosInPlaceOfSideFilesAreRefused() throws Exception {
        Path d = shared("hard");
        try (GpuScheduler s = open(d, group)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        Path other = tmp.resolve("other-name");
        Files.createLink(other, d.resolve("ledger"));
        byte[] before = Files.readAllBytes(other);
        refused(d, group, "hard links");
        assertThat(Files.readAllBytes(other)).isEqualTo(before);
        Files.delete(other);

        Path victim = Files.writeString(tmp.resolve("victim"), "root's\n", StandardCharsets.UTF_8);
        for (String side : List.of("ledger.lock", "node")) {
            Path s = d.resolve(side);
            Files.move(s, tmp.resolve(side + ".saved"));
            Files.createSymbolicLink(s, victim);
            refused(d, group, s.toString());
            assertThat(Files.readString(victim)).isEqualTo("root's\n");
            Files.delete(s);
            assertThat(run("mkfifo", s.toString())).isZero();
            refused(d, group, s.toString());
            Files.delete(s);
            Files.move(tmp.resolve(side + ".saved"), s);
        }
        try (GpuScheduler s = open(d, group)) {
            assertThat(s.allocations()).as("the node after the attacks").hasSize(1);
        }
    }

    @Test
    void aWaitersDirectoryReplacedByALinkIsNeitherFollowedNorWrittenThrough() throws Exception {
        Path d = shared("waiters");
        Path elsewhere = Files.createDirectory(tmp.resolve("elsewhere"));
        try (GpuScheduler s = open(d, group)) {
            String all = s.allocate(GpuRequest.builder().count(4).build()).id();
            Files.createSymbolicLink(d.resolve("waiters"), elsewhere);
            // a waiting allocation would register a ticket: it cannot, so it waits without a place in the node's
            // queue and is refused at its deadline; never a ticket in the link's target
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(1).build(), Duration.ofMillis(200)))
                    .isInstanceOf(GpuAllocationException.class);
            // with GPUs free, the queue is read before a grant: the link is refused, naming it
            s.release(all);
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(1).build()))
                    .isInstanceOf(LedgerException.class).hasMessageContaining(d.resolve("waiters").toString());
        }
        try (var files = Files.list(elsewhere)) {
            assertThat(files.toList()).as("files made through the link").isEmpty();
        }
        assertThat(Files.isSymbolicLink(d.resolve("waiters"))).isTrue();
    }

    @Test
    void modesAreSetWithoutFollowingALinkWhenAGroupMemberPlantsOneBetweenCreateAndChmod() throws Exception {
        // the directory chain: a link planted where gpusched makes a level is not chmod'ed through
        Path d = shared("chain");
        Path victimDir = Files.createDirectory(tmp.resolve("victim-dir"));
        Files.setPosixFilePermissions(victimDir, PosixFilePermissions.fromString("rwx------"));
        Files.createSymbolicLink(d.resolve("simulated"), victimDir);
        assertThatThrownBy(() -> open(d.resolve("simulated").resolve("pcie"), group)).isInstanceOfSatisfying(
                LedgerException.class, e -> assertThat(e.getMessage()).contains("symbolic link"));
        try (var made = Files.list(victimDir)) {
            assertThat(made.toList()).as("made through the link").isEmpty();
        }
        assertThat(Files.getPosixFilePermissions(victimDir)).isEqualTo(PosixFilePermissions.fromString(
                "rwx------"));
        assertThat(Files.getFileAttributeView(victimDir, PosixFileAttributeView.class).readAttributes().group()
                .getName()).isNotEqualTo(group);
    }
}
