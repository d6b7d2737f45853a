/**
 * The colour theme: "system" follows prefers-color-scheme (the CSS does that by itself), "light" and
 * "dark" pin it through data-theme on <html>. The choice is kept in localStorage; a missing or
 * unreadable value means "system".
 */
export type ThemeChoice = "system" | "light" | "dark";

const KEY = "durable-agent:theme";
const ORDER: readonly ThemeChoice[] = ["system", "light", "dark"];

function stored(): ThemeChoice {
  try {
    const value = localStorage.getItem(KEY);
    return value === "light" || value === "dark" ? value : "system";
  } catch {
    return "system";
  }
}

class Theme {
  choice = $state<ThemeChoice>(stored());

  constructor() {
    this.#apply();
  }

  set(choice: ThemeChoice): void {
    this.choice = choice;
    try {
      if (choice === "system") localStorage.removeItem(KEY);
      else localStorage.setItem(KEY, choice);
    } catch {
      // Storage refused (private mode): the choice lasts for this page only.
    }
    this.#apply();
  }

  /** The next choice in the switch's cycle: system -> light -> dark -> system. */
  next(): ThemeChoice {
    return ORDER[(ORDER.indexOf(this.choice) + 1) % ORDER.length]!;
  }

  #apply(): void {
    if (this.choice === "system") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = this.choice;
  }
}

export const theme = new Theme();
