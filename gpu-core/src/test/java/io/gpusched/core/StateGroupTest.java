package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The state group's resolution, and the kernel guard a shared directory relies on: where users may hard-link files they
 * do not own ({@code fs.protected_hardlinks = 0}, read from a fixture {@code /proc}), a shared directory is refused.
 */
class StateGroupTest {
    @TempDir
    Path tmp;

    @Test
    void aSharedDirectoryIsRefusedWhereUsersMayHardLinkOthersFiles() throws Exception {
        StateGroup root = StateGroup.named("0");
        assertThat(root.configured()).isTrue();
        Path proc = Files.createDirectories(tmp.resolve("proc/sys/fs"));
        Files.writeString(proc.resolve("protected_hardlinks"), "0\n");
        assertThatThrownBy(() -> LedgerDirectorySecurity.checkProtectedHardlinks(tmp, root, tmp.resolve("proc")))
                .isInstanceOfSatisfying(LedgerException.class, e -> {
                    assertThat(e.kind()).isEqualTo(LedgerException.Kind.INSECURE_PERMISSIONS);
                    assertThat(e.getMessage()).contains("fs.protected_hardlinks=1").contains(tmp.toString());
                });
        Files.writeString(proc.resolve("protected_hardlinks"), "1\n");
        assertThatCode(() -> LedgerDirectorySecurity.checkProtectedHardlinks(tmp, root, tmp.resolve("proc")))
                .doesNotThrowAnyException();
        assertThatCode(() -> LedgerDirectorySecurity.checkProtectedHardlinks(tmp, root, tmp.resolve("none")))
                .as("no /proc to read: nothing to say").doesNotThrowAnyException();
    }

    @Test
    void anUnknownGroupIsAConfigurationErrorNamingIt() {
        assertThatThrownBy(() -> StateGroup.named("gss-surely-not-a-group")).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("gss-surely-not-a-group").hasMessageContaining(StateGroup.ENV);
        assertThat(StateGroup.of(Optional.of(" ")).configured() == (System.getenv(StateGroup.ENV) != null
                && !System.getenv(StateGroup.ENV).isBlank())).isTrue();
        assertThat(StateGroup.NONE.configured()).isFalse();
    }
}
