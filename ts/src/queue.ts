// Queue is an AsyncIterable fed by push: the requests of a client stream.

export class Queue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: ((r: IteratorResult<T>) => void) | undefined;
  private ended = false;

  push(item: T): void {
    if (this.ended) {
      return;
    }
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      w({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** End the stream once what is queued has been read. */
  end(): void {
    this.ended = true;
    const w = this.waiter;
    if (w && this.items.length === 0) {
      this.waiter = undefined;
      w({ value: undefined, done: true });
    }
  }

  private stop(): Promise<IteratorResult<T>> {
    this.ended = true;
    this.items = [];
    const w = this.waiter;
    this.waiter = undefined;
    w?.({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: (): Promise<IteratorResult<T>> => {
        if (this.items.length > 0) {
          return Promise.resolve({ value: this.items.shift() as T, done: false });
        }
        if (this.ended) {
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve) => {
          this.waiter = resolve;
        });
      },
      return: (): Promise<IteratorResult<T>> => this.stop(),
      throw: (): Promise<IteratorResult<T>> => this.stop(),
    };
  }
}
