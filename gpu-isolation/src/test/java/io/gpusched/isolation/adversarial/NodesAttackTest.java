package io.gpusched.isolation.adversarial;

import static io.gpusched.isolation.adversarial.Adv.alloc;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.DeviceNodes;
import io.gpusched.isolation.IsolationException;
import io.gpusched.isolation.NodePlan;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** A job root is the job's to shape: symlinks, swapped directories and hard links must never leave it. */
@Tag("adversarial")
class NodesAttackTest {
    private Adv.Host host;
    private Path base;
    private Path root;
    private Path outside;
    private NodePlan plan;

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(Adv.isRoot(), "needs root for mknod");
        host = new Adv.Host();
        base = Files.createTempDirectory("gpx-adv-nodes");
        root = Files.createDirectory(base.resolve("job"));
        outside = Files.createDirectory(base.resolve("outside"));
        CgroupDeviceIsolator iso = host.nvidia().build();
        plan = iso.plan(alloc(Adv.nvDevices(), 1));
    }

    @AfterEach
    void tearDown() throws Exception {
        if (base != null) {
            try (Stream<Path> s = Files.walk(base)) {
                for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
        if (host != null) {
            host.close();
        }
    }

    private static List<Path> contents(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            return s.filter(p -> !p.equals(dir)).sorted().toList();
        }
    }

    @Test
    void symlinkedRootDevOrNodeIsRefusedAndNothingIsMadeOutside() throws Exception {
        Files.createSymbolicLink(root.resolve("dev"), outside);
        assertThrows(IsolationException.class, () -> DeviceNodes.create(root, host.dev, plan, 0666));
        assertEquals(List.of(), contents(outside));
        Files.delete(root.resolve("dev"));

        Path linkRoot = base.resolve("linkroot");
        Files.createSymbolicLink(linkRoot, outside);
        IsolationException e = assertThrows(IsolationException.class,
                () -> DeviceNodes.create(linkRoot, host.dev, plan, 0666));
        assertTrue(e.getMessage().contains(linkRoot.toString()), e.getMessage());
        assertEquals(List.of(), contents(outside));

        Files.createDirectory(root.resolve("dev"));
        Path secret = Files.writeString(outside.resolve("secret"), "s");
        Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rw-------"));
        Files.createSymbolicLink(root.resolve("dev/nvidia1"), secret);
        assertThrows(IsolationException.class, () -> DeviceNodes.create(root, host.dev, plan, 0666));
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(secret)));
        assertTrue(Files.isSymbolicLink(root.resolve("dev/nvidia1")), "the job's symlink was replaced");
        Files.delete(root.resolve("dev/nvidia1"));

        Files.writeString(root.resolve("dev/nvidia1"), "mine");
        assertThrows(IsolationException.class, () -> DeviceNodes.create(root, host.dev, plan, 0666));
        assertEquals("mine", Files.readString(root.resolve("dev/nvidia1")));
    }

    @Test
    void nodesGetExactlyTheModeAskedForAndRemoveTakesOnlyThem() throws Exception {
        DeviceNodes.Created c = DeviceNodes.create(root, host.dev, plan, 0666);
        assertFalse(c.made().isEmpty());
        for (Path p : c.made()) {
            assertEquals("rw-rw-rw-", PosixFilePermissions.toString(
                    Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS)), p.toString());
        }
        c.remove();
        for (Path p : c.made()) {
            assertFalse(Files.exists(p, LinkOption.NOFOLLOW_LINKS), p + " left behind");
        }
        c.remove();
    }

    @Test
    void removeAfterTheJobSwappedDevForASymlink_removesNothingOutside() throws Exception {
        DeviceNodes.Created c = DeviceNodes.create(root, host.dev, plan, 0666);
        Files.move(root.resolve("dev"), base.resolve("moved"), StandardCopyOption.ATOMIC_MOVE);
        // the outside holds the same devices: a remove that followed the link would take them
        Adv.mknod(outside.resolve("nvidia1"), 195, 1);
        Adv.mknod(outside.resolve("nvidiactl"), 195, 255);
        List<Path> before = contents(outside);
        Files.createSymbolicLink(root.resolve("dev"), outside);
        c.remove();
        assertEquals(before, contents(outside));
    }

    @Test
    void racingADirectoryForASymlinkDuringCreate_neverMakesOrChmodsAnythingOutside() throws Exception {
        Path secret = outside.resolve("nvidia1");
        Files.writeString(secret, "host file");
        Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rw-------"));
        AtomicBoolean stop = new AtomicBoolean();
        Path dev = root.resolve("dev");
        Path spare = base.resolve("spare");
        Thread racer = new Thread(() -> {
            while (!stop.get()) {
                try {
                    Files.deleteIfExists(spare);
                    Files.createSymbolicLink(spare, outside);
                    if (Files.isDirectory(dev, LinkOption.NOFOLLOW_LINKS)) {
                        Files.move(dev, base.resolve("olddev-" + System.nanoTime()));
                    }
                    Files.move(spare, dev, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                    Files.delete(dev);
                } catch (IOException ignored) {
                    // the creator got there first: try again
                }
            }
        });
        racer.start();
        int made = 0;
        int refused = 0;
        try {
            for (int i = 0; i < 400; i++) {
                try {
                    DeviceNodes.create(root, host.dev, plan, 0666).remove();
                    made++;
                } catch (IsolationException e) {
                    refused++;
                }
            }
        } finally {
            stop.set(true);
            racer.join();
        }
        assertEquals(List.of(secret), contents(outside), "made " + made + ", refused " + refused);
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(secret)));
        assertEquals("host file", Files.readString(secret));
    }

    @Test
    void racingAHardLinkOverTheNewNodeBeforeItsChmod_neverOpensAHostFile() throws Exception {
        // the job swaps the just-made node for a hard link to a file it may not read (same filesystem), hoping the
        // chmod 0666 that follows mknod lands on that file
        Path secret = Files.writeString(base.resolve("secret"), "host file");
        Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rw-------"));
        Files.createDirectories(root.resolve("dev"));
        Path node = root.resolve("dev/nvidia1");
        AtomicBoolean stop = new AtomicBoolean();
        Thread racer = new Thread(() -> {
            Path tmp = root.resolve("dev/.swap");
            while (!stop.get()) {
                try {
                    Files.deleteIfExists(tmp);
                    Files.createLink(tmp, secret);
                    if (Files.exists(node, LinkOption.NOFOLLOW_LINKS)) {
                        Files.move(tmp, node, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                        Files.deleteIfExists(node);
                    }
                } catch (IOException ignored) {
                    // lost a round
                }
            }
        });
        racer.start();
        try {
            for (int i = 0; i < 1500 && PosixFilePermissions.toString(Files.getPosixFilePermissions(secret))
                    .equals("rw-------"); i++) {
                try {
                    DeviceNodes.create(root, host.dev, plan, 0666).remove();
                } catch (IsolationException refused) {
                    // fine: refusing is safe
                }
            }
        } finally {
            stop.set(true);
            racer.join();
        }
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(secret)),
                "a host file hard-linked into the job root was made world-writable");
    }

    @Test
    void plansOfBadAllocationsAreTypedErrorsNamingTheDevice() {
        CgroupDeviceIsolator iso = host.nvidia().build();
        io.gpusched.core.GpuDevice noMinor = io.gpusched.core.GpuDevice.builder().index(0).uuid("GPU-adv-nominor")
                .vendor(io.gpusched.core.GpuVendor.NVIDIA).name("Fake")
                .memory(io.gpusched.core.MemorySize.ofGibibytes(1)).pciBusId("00000000:09:00.0").build();
        IsolationException e = assertThrows(IsolationException.class,
                () -> iso.plan(new io.gpusched.core.Allocation("adv-nominor", List.of(noMinor),
                        io.gpusched.core.GpuRequest.builder().build(), java.time.Instant.now())));
        assertTrue(e.getMessage().contains("GPU-adv-nominor") || e.getMessage().contains("minor"), e.getMessage());
        List<io.gpusched.core.GpuDevice> mixed = List.of(Adv.nvDevices().get(0), Adv.amdDevices().get(0));
        assertThrows(IsolationException.class, () -> CgroupDeviceIsolator.builder().hostDevices(mixed)
                .devRoot(host.dev).procRoot(host.proc).build().plan(new io.gpusched.core.Allocation("adv-mixed", mixed,
                        io.gpusched.core.GpuRequest.builder().count(2).build(), java.time.Instant.now())));
    }
}
