package io.gpusched.core.devices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Root runs {@link NvidiaModprobe}: only a helper that root alone could have written is run, with an empty environment,
 * bounded output and a time limit. The stand-ins are shell scripts; owners are changed with chown (root only).
 */
@Tag("root")
class NvidiaModprobeTest {
    @TempDir
    Path tmp;
    Path bin;

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root: chown of the stand-ins");
        bin = Files.createDirectory(tmp.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path probe = script("probe", "exit 0");
        String above = NvidiaModprobe.at(probe).untrusted().orElse("");
        assumeTrue(above.isEmpty(), () -> "the temporary directory's own parents are not root-only (" + above
                + "): the trusted cases cannot be shown here");
    }

    Path script(String name, String body) throws Exception {
        Path p = bin.resolve(name);
        Files.writeString(p, "#!/bin/sh\n" + body + "\n");
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        return p;
    }

    @Test
    void aRootOwnedHelperNoOneElseCanWriteRunsWithTheUvmArgumentsAndAnEmptyEnvironment() throws Exception {
        Path out = tmp.resolve("out");
        NvidiaModprobe m = NvidiaModprobe.at(script("nvidia-modprobe", "echo \"$@\" > '" + out + "'; env | cut -d= -f1"
                + " | sort >> '" + out + "'; echo loaded"));
        NvidiaModprobe.Result r = m.loadUvm(Duration.ofSeconds(30));
        assertThat(r.succeeded()).as(r.summary()).isTrue();
        assertThat(r.summary()).endsWith("-u -c=0 exited 0: loaded");
        assertThat(Files.readAllLines(out).get(0)).isEqualTo("-u -c=0");
        assertThat(Files.readAllLines(out).subList(1, Files.readAllLines(out).size()))
                .isSubsetOf("PATH", "PWD", "SHLVL", "_", "OLDPWD");
    }

    @Test
    void aHelperOthersOwnOrCanWriteIsNotRun() throws Exception {
        Path mark = tmp.resolve("ran");
        Path owned = script("owned", "touch '" + mark + "'");
        Files.setAttribute(owned, "unix:uid", 65534);
        assertThat(NvidiaModprobe.at(owned).untrusted()).hasValueSatisfying(w -> assertThat(w).contains("uid 65534"));
        Path writable = script("writable", "touch '" + mark + "'");
        Files.setPosixFilePermissions(writable, PosixFilePermissions.fromString("rwxrwxrwx"));
        assertThat(NvidiaModprobe.at(writable).untrusted()).hasValueSatisfying(w -> assertThat(w).contains("writable"));
        Path openDir = Files.createDirectory(tmp.resolve("open"));
        Files.setPosixFilePermissions(openDir, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path inOpenDir = Files.copy(owned, openDir.resolve("nvidia-modprobe"));
        Files.setAttribute(inOpenDir, "unix:uid", 0);
        assertThat(NvidiaModprobe.at(inOpenDir).untrusted())
                .hasValueSatisfying(w -> assertThat(w).contains(openDir.toString()).contains("writable"));
        Path link = bin.resolve("link");
        Files.createSymbolicLink(link, owned);
        assertThat(NvidiaModprobe.at(link).untrusted()).as("a link to a helper others own")
                .hasValueSatisfying(w -> assertThat(w).contains("uid 65534"));
        for (Path p : new Path[]{owned, writable, inOpenDir, link, bin.resolve("missing")}) {
            NvidiaModprobe.Result r = NvidiaModprobe.at(p).loadUvm(Duration.ofSeconds(30));
            assertThat(r.ran()).as(r.summary()).isFalse();
            assertThat(r.summary()).contains("not run");
        }
        assertThat(mark).doesNotExist();
    }

    @Test
    void aStickyRootDirectoryAndALinkToATrustedHelperAreFine() throws Exception {
        Path sticky = Files.createDirectory(tmp.resolve("sticky"));
        Files.setPosixFilePermissions(sticky, PosixFilePermissions.fromString("rwxrwxrwx"));
        new ProcessBuilder("chmod", "+t", sticky.toString()).start().waitFor();
        Path p = Files.copy(script("ok", "exit 0"), sticky.resolve("nvidia-modprobe"));
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        assertThat(NvidiaModprobe.at(p).untrusted()).isEmpty();
        Path link = bin.resolve("nvidia-modprobe-link");
        Files.createSymbolicLink(link, p);
        assertThat(NvidiaModprobe.at(link).loadUvm(Duration.ofSeconds(30)).succeeded()).isTrue();
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aHelperThatHangsIsKilledAndOneThatFloodsIsCut() throws Exception {
        NvidiaModprobe.Result hung =
                NvidiaModprobe.at(script("hang", "exec sleep 600")).loadUvm(Duration.ofMillis(300));
        assertThat(hung.ran()).isTrue();
        assertThat(hung.exitCode()).isEmpty();
        assertThat(hung.summary()).contains("did not end within 300 ms and was killed");
        NvidiaModprobe.Result flood = NvidiaModprobe.at(script("flood", "head -c 1000000 /dev/zero | tr '\\0' x;"
                + " exit 3")).loadUvm(Duration.ofSeconds(60));
        assertThat(flood.exitCode()).hasValue(3);
        assertThat(flood.output()).hasSizeLessThanOrEqualTo(4096).startsWith("xxxx");
    }

    @Test
    void aRelativePathIsRefused() {
        assertThatThrownBy(() -> NvidiaModprobe.at(Path.of("nvidia-modprobe")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must be absolute");
    }
}
