package io.logbroker.spark;

import java.io.IOException;
import java.io.Serial;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * A node's key ring for encryption at rest, read from the file the node reads
 * ({@code --encryption-keys-file}); the same format and checks as {@code segments/key_ring.py}:
 *
 * <pre>
 * # comment
 * current ID
 * key ID BASE64-OF-32-BYTES
 * </pre>
 *
 * A file the group or others may access is refused (a key ring that leaked protects nothing).
 */
public final class KeyRing {
    public static final int KEY_BYTES = 32;
    static final long RING_FILE_BYTES_MAX = 256 * 1024;

    private final Map<Long, byte[]> keys;
    private final long current;

    private KeyRing(Map<Long, byte[]> keys, long current) {
        this.keys = keys;
        this.current = current;
    }

    /** The key with {@code id}, or null when the ring has none. */
    public byte[] key(long id) {
        return keys.get(id);
    }

    public long current() {
        return current;
    }

    /** An unreadable, unsafe or malformed key ring file. */
    public static final class KeyRingException extends RuntimeException {
        @Serial
        private static final long serialVersionUID = 1L;

        public KeyRingException(String message) {
            super(message);
        }
    }

    public static KeyRing load(String path) {
        Path file = Path.of(path);
        try {
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(file);
            for (PosixFilePermission p : perms) {
                if (p.name().startsWith("GROUP") || p.name().startsWith("OTHERS")) {
                    throw new KeyRingException("the key ring " + path + " may be accessed by the group or others; "
                            + "run chmod 600 " + path);
                }
            }
            if (Files.size(file) > RING_FILE_BYTES_MAX) {
                throw new KeyRingException("the key ring " + path + " is larger than " + RING_FILE_BYTES_MAX + " bytes");
            }
            return parse(Files.readString(file, StandardCharsets.US_ASCII), path);
        } catch (IOException e) {
            throw new KeyRingException("cannot read the key ring " + path + ": " + e);
        }
    }

    public static KeyRing parse(String text, String source) {
        Map<Long, byte[]> keys = new HashMap<>();
        Long current = null;
        String[] lines = text.split("\n", -1);
        for (int i = 0; i < lines.length; i++) {
            String line = lines[i].strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] words = line.split("\\s+");
            try {
                if (words[0].equals("current") && words.length == 2 && current == null) {
                    current = Long.parseLong(words[1]);
                } else if (words[0].equals("key") && words.length == 3 && !keys.containsKey(Long.parseLong(words[1]))) {
                    byte[] key = Base64.getDecoder().decode(words[2]);
                    if (key.length != KEY_BYTES) {
                        throw new KeyRingException(source + ", line " + (i + 1) + ": key is " + key.length
                                + " bytes; an AES-256 key is " + KEY_BYTES);
                    }
                    keys.put(Long.parseLong(words[1]), key);
                } else {
                    throw new KeyRingException(source + ", line " + (i + 1)
                            + ": expected 'current ID' (once) or 'key ID BASE64' (each id once)");
                }
            } catch (IllegalArgumentException e) {
                throw new KeyRingException(source + ", line " + (i + 1) + ": " + e.getMessage());
            }
        }
        if (current == null) {
            throw new KeyRingException(source + ": no 'current ID' line");
        }
        if (!keys.containsKey(current)) {
            throw new KeyRingException(source + ": the current key id " + current + " is not in the ring");
        }
        return new KeyRing(Map.copyOf(keys), current);
    }
}
