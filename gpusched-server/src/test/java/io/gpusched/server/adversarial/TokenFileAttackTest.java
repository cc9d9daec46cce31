package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.server.ApiToken;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The token file is the key to every change: links, loose modes and loose directories are refused. */
@Tag("adversarial")
class TokenFileAttackTest {

    @Test
    void aSymlinkedTokenFileIsRefusedEvenWhenItsTargetIs0600(@TempDir Path dir) throws Exception {
        Path elsewhere = Files.writeString(dir.resolve("attacker-chosen"), "a".repeat(64));
        Files.setPosixFilePermissions(elsewhere, PosixFilePermissions.fromString("rw-------"));
        Path state = Files.createDirectory(dir.resolve("state"));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
        Files.createSymbolicLink(state.resolve(ApiToken.FILE_NAME), elsewhere);
        assertThatThrownBy(() -> ApiToken.loadOrCreate(state)).hasMessageContaining(ApiToken.FILE_NAME);
        assertThat(Files.readString(elsewhere)).isEqualTo("a".repeat(64));
    }

    @Test
    void aDanglingSymlinkIsNotFollowedToCreateTheToken(@TempDir Path dir) throws Exception {
        Path state = Files.createDirectory(dir.resolve("state"));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
        Path target = dir.resolve("written-through-link");
        Files.createSymbolicLink(state.resolve(ApiToken.FILE_NAME), target);
        assertThatThrownBy(() -> ApiToken.loadOrCreate(state)).hasMessageContaining(ApiToken.FILE_NAME);
        assertThat(target).doesNotExist();
    }

    @Test
    void aTokenInADirectoryOthersCanWriteIsRefused(@TempDir Path dir) throws Exception {
        for (String mode : new String[]{"rwxrwx---", "rwx---rwx", "rwxrwxrwx"}) {
            Path state = Files.createDirectory(dir.resolve("state-" + mode));
            Files.setPosixFilePermissions(state, PosixFilePermissions.fromString(mode));
            assertThatThrownBy(() -> ApiToken.loadOrCreate(state)).as(mode).hasMessageContaining(state.toString());
        }
    }

    @Test
    void aTokenFileOthersCanReadOrWriteIsRefused(@TempDir Path dir) throws Exception {
        for (String mode : new String[]{"rw-r-----", "rw----r--", "rw--w----", "rw-rw-rw-"}) {
            Path state = Files.createDirectory(dir.resolve("s-" + mode));
            Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
            Path f = Files.writeString(state.resolve(ApiToken.FILE_NAME), "b".repeat(64));
            Files.setPosixFilePermissions(f, PosixFilePermissions.fromString(mode));
            assertThatThrownBy(() -> ApiToken.loadOrCreate(state)).as(mode).hasMessageContaining(ApiToken.FILE_NAME);
        }
    }
}
