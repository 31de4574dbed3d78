/*
 * Command-line arguments of the driver protocol (integration-tests/README.md):
 *   <command> --bootstrap HOST:PORT [--name value | --flag]...
 * Invariants: every option starts with "--"; an option followed by another option (or by
 * nothing) is a flag whose value is "true"; repeatable options (--config, --set, --delete)
 * keep every value in order. Parsing never throws anything but UsageException.
 */
package dev.brook.driver;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

final class Args {
    /** A malformed command line: the driver exits with code 2 (usage error). */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    final String command;
    private final Map<String, List<String>> options;

    private Args(String command, Map<String, List<String>> options) {
        this.command = command;
        this.options = options;
    }

    static Args parse(String[] argv) throws UsageException {
        if (argv.length == 0 || argv[0].startsWith("--")) {
            throw new UsageException("usage: brook-driver <command> --bootstrap HOST:PORT [options]");
        }
        Map<String, List<String>> options = new LinkedHashMap<>();
        int i = 1;
        while (i < argv.length) {
            String name = argv[i];
            if (!name.startsWith("--") || name.length() == 2) {
                throw new UsageException("expected an option, got '" + name + "'");
            }
            String value = "true";
            if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                value = argv[i + 1];
                i++;
            }
            options.computeIfAbsent(name.substring(2), k -> new ArrayList<>()).add(value);
            i++;
        }
        return new Args(argv[0], options);
    }

    Optional<String> get(String name) {
        List<String> values = options.get(name);
        return values == null ? Optional.empty() : Optional.of(values.get(values.size() - 1));
    }

    String required(String name) throws UsageException {
        return get(name).orElseThrow(() -> new UsageException("--" + name + " is required for " + command));
    }

    List<String> all(String name) {
        return options.getOrDefault(name, List.of());
    }

    boolean flag(String name) {
        return get(name).map(v -> !v.equals("false")).orElse(false);
    }

    int intValue(String name, int fallback) throws UsageException {
        Optional<String> raw = get(name);
        if (raw.isEmpty()) {
            return fallback;
        }
        try {
            return Integer.parseInt(raw.get());
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " expects an integer, got '" + raw.get() + "'");
        }
    }

    int requiredInt(String name) throws UsageException {
        required(name);
        return intValue(name, 0);
    }

    /** Splits "k=v" (the value may itself contain '='). */
    static Map.Entry<String, String> keyValue(String option, String raw) throws UsageException {
        int eq = raw.indexOf('=');
        if (eq <= 0) {
            throw new UsageException("--" + option + " expects key=value, got '" + raw + "'");
        }
        return Map.entry(raw.substring(0, eq), raw.substring(eq + 1));
    }
}
